// Owners of verbs objects: each releases its object through the verbs table
// (rdma_verbs_api.hpp) when it goes out of scope, so an error return anywhere
// in device or transport setup leaks nothing. Declare them in creation order
// (context, PD, MRs, completion channel, CQ, QP): members are destroyed in reverse, which is the
// order verbs requires (a QP before its CQ, MRs before their PD).
//
// abandon() forgets the object without releasing it: in a forked child the
// objects belong to the parent's verbs context and must not be touched.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>

#include "rdma/rdma_verbs_api.hpp"
#include "sys/thread_cancel.hpp"

namespace rdmasock {

template <class T, auto Release>
class VerbsOwner {
public:
    VerbsOwner() = default;
    VerbsOwner(const VerbsApi& api, T* object) : api_(&api), object_(object) {}
    ~VerbsOwner() { reset(); }
    VerbsOwner(VerbsOwner&& o) noexcept : api_(o.api_), object_(std::exchange(o.object_, nullptr)) {}
    VerbsOwner& operator=(VerbsOwner&& o) noexcept {
        if (this != &o) {
            reset();
            api_ = o.api_;
            object_ = std::exchange(o.object_, nullptr);
        }
        return *this;
    }
    VerbsOwner(const VerbsOwner&) = delete;
    VerbsOwner& operator=(const VerbsOwner&) = delete;

    T* get() const { return object_; }
    T* operator->() const { return object_; }
    explicit operator bool() const { return object_ != nullptr; }
    void reset() {
        if (object_) {
            // rdma-core closes fds inside (libc's close, a cancellation point),
            // often from a destructor: no pending pthread_cancel acts there.
            cancel::Shield shield;
            (api_->*Release)(object_);
        }
        object_ = nullptr;
    }
    void abandon() { object_ = nullptr; }

private:
    const VerbsApi* api_ = nullptr;
    T* object_ = nullptr;
};

using DeviceList = VerbsOwner<ibv_device*, &VerbsApi::free_device_list>;
using VerbsContext = VerbsOwner<ibv_context, &VerbsApi::close_device>;
using ProtectionDomain = VerbsOwner<ibv_pd, &VerbsApi::dealloc_pd>;
using MemoryRegion = VerbsOwner<ibv_mr, &VerbsApi::dereg_mr>;
using CompChannel = VerbsOwner<ibv_comp_channel, &VerbsApi::destroy_comp_channel>;  // before its CQs
using CompletionQueue = VerbsOwner<ibv_cq, &VerbsApi::destroy_cq>;
using QueuePair = VerbsOwner<ibv_qp, &VerbsApi::destroy_qp>;

// Anonymous private pages (rings, ctrl and scratch blocks), unmapped on
// destruction; abandon() as above (MADV_DONTFORK pages are absent in a child).
class MappedPages {
public:
    MappedPages() = default;
    ~MappedPages() { reset(); }
    MappedPages(MappedPages&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
    MappedPages& operator=(MappedPages&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            bytes_ = o.bytes_;
        }
        return *this;
    }
    MappedPages(const MappedPages&) = delete;
    MappedPages& operator=(const MappedPages&) = delete;

    // bytes rounded up to pages; false with the reason (`what` names the block).
    // shared: MAP_SHARED, so a forked child sees the parent's later writes
    // (never copy-on-write, so no MADV_DONTFORK either).
    bool map(uint64_t bytes, bool dontfork, const char* what, std::string& err, bool shared = false);
    uint8_t* data() const { return data_; }
    void reset();
    void abandon() { data_ = nullptr; }

private:
    uint8_t* data_ = nullptr;
    uint64_t bytes_ = 0;
};

// ibv_reg_mr with the error text of rdma_transport's setup ("ibv_reg_mr of the
// receive ring (N bytes) failed: ... (locked-memory limit? ...)").
MemoryRegion register_memory(const VerbsApi& api, ibv_pd* pd, void* addr, size_t bytes, int access, const char* what,
                             std::string& err);

}  // namespace rdmasock
