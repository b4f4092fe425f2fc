#include "rdma/rdma_verbs_objects.hpp"

#include <sys/mman.h>

#include <cerrno>

#include "rdma/rdma_device.hpp"

namespace rdmasock {

namespace {
constexpr uint64_t kPage = 4096;
uint64_t page_round(uint64_t bytes) { return (bytes + kPage - 1) & ~(kPage - 1); }
}  // namespace

bool MappedPages::map(uint64_t bytes, bool dontfork, const char* what, std::string& err, bool shared) {
    reset();
    const uint64_t len = page_round(bytes);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        err = std::string("mmap of the ") + what + " (" + std::to_string(len) + " bytes) failed: " + errno_text(errno);
        return false;
    }
    // Registered memory must not become copy-on-write in a fork: the parent would
    // write to a fresh copy while the NIC keeps using the old page. Kernels with
    // copy-on-fork for pinned pages give the child a copy at fork time instead (a
    // frozen snapshot it may even read); older ones need MADV_DONTFORK (the pages
    // are then absent in the child, which never uses verbs: RdmaDevice::usable).
    if (dontfork && !shared) madvise(p, len, MADV_DONTFORK);
    data_ = static_cast<uint8_t*>(p);
    bytes_ = len;
    return true;
}

void MappedPages::reset() {
    if (data_) munmap(data_, bytes_);
    data_ = nullptr;
}

MemoryRegion register_memory(const VerbsApi& api, ibv_pd* pd, void* addr, size_t bytes, int access, const char* what,
                             std::string& err) {
    ibv_mr* mr = api.reg_mr(pd, addr, bytes, access);
    if (!mr) {
        const int e = errno;
        err = std::string("ibv_reg_mr of the ") + what + " (" + std::to_string(bytes) + " bytes) failed: " + errno_text(e);
        if (e == ENOMEM || e == EPERM || e == EAGAIN) err += " (locked-memory limit? see ulimit -l)";
    }
    return MemoryRegion(api, mr);
}

}  // namespace rdmasock
