#include "shm_segment.hpp"

#include "shm_sweep.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

namespace rdmasock {

namespace {

std::string random_name() {
    std::random_device rd;
    char buf[64];
    snprintf(buf, sizeof buf, "/rdmasock-%d-%08x%08x", static_cast<int>(getpid()), rd(), rd());
    return buf;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
    if (this != &o) {
        this->~ShmSegment();
        data_ = o.data_;
        size_ = o.size_;
        name_ = std::move(o.name_);
        owns_name_ = o.owns_name_;
        o.data_ = nullptr;
        o.size_ = 0;
        o.owns_name_ = false;
    }
    return *this;
}

ShmSegment::~ShmSegment() {
    unlink();
    if (data_) munmap(data_, size_);
    data_ = nullptr;
}

bool ShmSegment::create(size_t size, std::string& err) {
    sweep_orphan_segments_now_and_then();
    std::string name;
    int fd = -1;
    for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
        name = random_name();
        fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST) return err = errno_text("shm_open"), false;
    }
    if (fd < 0) return err = "shm_open: no free name", false;
    // fchmod: the umask must not widen or narrow what we promise (0600).
    if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
        err = errno_text("ftruncate");
        close(fd);
        shm_unlink(name.c_str());
        return false;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        err = errno_text("mmap");
        shm_unlink(name.c_str());
        return false;
    }
    data_ = p;
    size_ = size;
    name_ = name;
    owns_name_ = true;
    return true;
}

bool ShmSegment::open(const std::string& name, size_t size, std::string& err) {
    if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos || name.size() > 200)
        return err = "malformed segment name", false;
    int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) return err = errno_text("shm_open"), false;
    struct stat st{};
    if (fstat(fd, &st) != 0) {
        err = errno_text("fstat");
        close(fd);
        return false;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 0777) != 0600 || static_cast<size_t>(st.st_size) != size) {
        err = "segment has the wrong owner, mode or size";
        close(fd);
        return false;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return err = errno_text("mmap"), false;
    data_ = p;
    size_ = size;
    name_ = name;
    owns_name_ = true;  // the attaching peer may remove the name too (the creator may be gone)
    return true;
}

void ShmSegment::unlink() {
    if (owns_name_) shm_unlink(name_.c_str());
    owns_name_ = false;
}

}  // namespace rdmasock
