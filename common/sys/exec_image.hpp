// What the loader makes of a file that an exec is about to run: whether a
// preloaded library (LD_PRELOAD) will stand between the new program and the
// kernel for its reads.
//
// An exec may hand the new image bytes that only the shim can serve (kept
// bytes, common/shm/leftover.hpp): that is only safe where the shim is loaded
// and the program reads through the calls it interposes. It is not:
// - a statically linked program (no PT_INTERP: no loader, no preload, the
//   static-pie case too), or one of another class or machine (the loader
//   skips a preload it cannot map);
// - a Go program: its runtime makes its own system calls, around libc.
// A script (#!) is what its interpreter is (followed, as the kernel does, a
// few levels deep). Anything else, or a file that cannot be read: false.
//
// (Set-user-ID programs and file capabilities, where the loader ignores
// LD_PRELOAD, are the caller's check: they depend on the credentials.)
#pragma once

namespace rdmasock::exec_image {

enum class Image {
    dynamic,        // a dynamically linked ELF of our class and machine: the preload reaches it
    static_linked,  // no PT_INTERP: no loader runs
    go,             // a Go program: its runtime calls the kernel itself
    foreign,        // an ELF of another class, byte order or machine: the loader skips our library
    unknown,        // not ELF, unreadable, or a #! chain that ends in none of these
};

// What the program in `fd` (open for reading) is; a script, what its interpreter is.
Image inspect(int fd);
// inspect(fd) == Image::dynamic; errno kept (the exec interposers call it).
bool preload_reaches(int fd);

}  // namespace rdmasock::exec_image
