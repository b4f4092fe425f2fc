// A POSIX shared-memory segment shared by exactly two processes of one user.
//
// Created 0600 with O_EXCL under a random name; the creator unlinks it as soon
// as the peer reports it mapped, so the name exists only during the handshake.
#pragma once

#include <cstddef>
#include <string>

namespace rdmasock {

class ShmSegment {
public:
    ShmSegment() = default;
    ShmSegment(const ShmSegment&) = delete;
    ShmSegment& operator=(const ShmSegment&) = delete;
    ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }
    ShmSegment& operator=(ShmSegment&& o) noexcept;
    ~ShmSegment();

    // Creates and maps a fresh zeroed segment. False with `err` set on failure.
    bool create(size_t size, std::string& err);
    // Maps an existing segment: it must belong to our user, be mode 0600 and have
    // exactly `size` bytes, or a hostile peer could make us map something else.
    bool open(const std::string& name, size_t size, std::string& err);
    // Removes the name (idempotent). The mapping stays valid.
    void unlink();

    void* data() const { return data_; }
    size_t size() const { return size_; }
    const std::string& name() const { return name_; }

private:
    void* data_ = nullptr;
    size_t size_ = 0;
    std::string name_;
    bool owns_name_ = false;
};

}  // namespace rdmasock
