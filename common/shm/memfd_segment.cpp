#include "shm/memfd_segment.hpp"
#include "sys/kernel_calls.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "shm/memory_budget.hpp"
#include "sys/own_fd.hpp"

namespace rdmasock {

namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

void* map_shared(int fd, size_t size) {
    // No MAP_POPULATE: populating a shared mapping allocates every page.
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

MemfdSegment& MemfdSegment::operator=(MemfdSegment&& o) noexcept {
    if (this != &o) {
        this->~MemfdSegment();
        data_ = o.data_, size_ = o.size_, fd_ = o.fd_, held_ = o.held_;
        o.data_ = nullptr, o.size_ = 0, o.fd_ = -1, o.held_ = 0;
    }
    return *this;
}

MemfdSegment::~MemfdSegment() {
    if (data_) {
        munmap(data_, size_);
        memory_budget::mapped(-static_cast<int64_t>(size_));
    }
    if (held_) memory_budget::release(held_);
    release_fd();
    data_ = nullptr;
    held_ = 0;
}

void MemfdSegment::release_fd() {
    if (fd_ >= 0) close_own_fd(fd_);
    fd_ = -1;
}

bool MemfdSegment::create(size_t size, size_t charge, std::string& err) {
    int fd = memfd_create("rdmasock-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return err = errno_text("memfd_create"), false;
    fd_ = fd;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) return err = errno_text("ftruncate"), false;
    if (kernel::fcntl(fd, F_ADD_SEALS, kSeals) != 0) return err = errno_text("F_ADD_SEALS"), false;
    data_ = map_shared(fd, size);
    if (!data_) return err = errno_text("mmap"), false;
    size_ = size;
    memory_budget::mapped(static_cast<int64_t>(size));
    memory_budget::hold(charge);
    held_ = charge;
    return true;
}

const char* unsafe_to_map(int fd, size_t size) {
    // Without these seals the sender could shrink the file under our mapping (SIGBUS).
    const int seals = kernel::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & kSeals) != kSeals) return "not sealed";
    // A memfd of the kernel's shmem mount, whose holes fault in without a size
    // limit; a hugetlbfs memfd (sealable too) could run out of pages into SIGBUS.
    struct statfs fs {};
    if (fstatfs(fd, &fs) != 0 || fs.f_type != TMPFS_MAGIC) return "not a shared-memory memfd";
    // The sender chose the size: it must leave the program its address space.
    if (!memory_budget::address_space_allows(size)) return "not enough address space for it (RLIMIT_AS)";
    return nullptr;
}

bool MemfdSegment::attach(int fd, size_t size, std::string& err) {
    fd_ = fd;
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0) return err = "no segment fd", false;
    if (!S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) != size)
        return err = "the peer's segment has the wrong size or type", false;
    if (const char* why = unsafe_to_map(fd, size)) return err = std::string("the peer's segment: ") + why, false;
    data_ = map_shared(fd, size);
    if (!data_) return err = errno_text("mmap"), false;
    size_ = size;
    memory_budget::mapped(static_cast<int64_t>(size));
    release_fd();
    return true;
}

}  // namespace rdmasock
