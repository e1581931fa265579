// torch's CPU allocator while the loader runs a user's batch code (collate_fn=, a callable
// batch_transform=): see ops/batch_memory.py for why.
//
// Blocks of kLarge bytes or more are kept when freed, up to kKeptBlocks of them (kKeptBytes in
// all), and handed out again for the same size: a batch-sized tensor made every batch then
// costs no fresh pages. Every block is 64-byte aligned, as torch's, and carries its own
// deleter, so a tensor made here may be freed anywhere, in any thread, at any time later.
// No huge pages: a fresh block advised as huge pages cost 4x the time of plain pages to fault
// in (the kernel compacts memory for them), and a kept block faults in nothing either way.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kLarge = size_t(2) << 20;   // smaller blocks are made and freed as torch makes them
constexpr size_t kAlignment = 64;              // torch's gAlignment
constexpr size_t kKeptBlocks = 4;        // a batch's few tensors, two batches in flight
constexpr size_t kKeptBytes = size_t(1) << 30;   // and never more than this kept

// Held for a map lookup. A child forked while another thread held it gets it afresh.
pthread_mutex_t busy = PTHREAD_MUTEX_INITIALIZER;
struct Locked {
  Locked() { pthread_mutex_lock(&busy); }
  ~Locked() { pthread_mutex_unlock(&busy); }
};

std::unordered_map<void*, size_t>& large_sizes() {   // the large blocks out, by address
  static auto* sizes = new std::unordered_map<void*, size_t>();   // never destroyed: frees may come at exit
  return *sizes;
}
std::vector<std::pair<void*, size_t>>& kept() {   // freed large blocks, oldest first
  static auto* blocks = new std::vector<std::pair<void*, size_t>>();
  return *blocks;
}

size_t kept_bytes() {
  size_t total = 0;
  for (auto& block : kept()) total += block.second;
  return total;
}

void release(void* data) {
  if (data == nullptr) return;
  std::vector<void*> dropped;
  {
    Locked lock;
    auto found = large_sizes().find(data);
    if (found == large_sizes().end()) {
      std::free(data);   // a small block
      return;
    }
    kept().emplace_back(data, found->second);
    large_sizes().erase(found);
    while (!kept().empty() && (kept().size() > kKeptBlocks || kept_bytes() > kKeptBytes)) {
      dropped.push_back(kept().front().first);   // the oldest first
      kept().erase(kept().begin());
    }
  }
  for (void* block : dropped) std::free(block);
}

void* reuse(size_t bytes) {
  Locked lock;
  auto& blocks = kept();
  for (auto it = blocks.end(); it != blocks.begin();) {   // the newest of that size: its pages are warm
    --it;
    if (it->second == bytes) {
      void* data = it->first;
      blocks.erase(it);
      large_sizes().emplace(data, bytes);
      return data;
    }
  }
  return nullptr;
}

void* fresh(size_t bytes) {
  void* data = nullptr;
  if (posix_memalign(&data, kAlignment, bytes) != 0) throw std::bad_alloc();
  return data;
}

struct BatchMemory final : c10::Allocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &release, cpu};
    if (nbytes < kLarge) {
      void* data = fresh(nbytes);
      return {data, data, &release, cpu};
    }
    void* data = reuse(nbytes);
    if (data == nullptr) {
      data = fresh(nbytes);
      Locked lock;
      large_sizes().emplace(data, nbytes);
    }
    return {data, data, &release, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }
};

BatchMemory the_allocator;

void forked_child() { pthread_mutex_init(&busy, nullptr); }
const int registered = pthread_atfork(nullptr, nullptr, &forked_child);

}  // namespace

extern "C" {

// torch's CPU allocator now.
void* dali_loaders_cpu_allocator() { return c10::GetCPUAllocator(); }

// Makes `allocator` (nullptr: this library's) torch's CPU allocator at `priority`; 1 where
// it is torch's afterwards (torch keeps an allocator of a higher priority).
int dali_loaders_set_cpu_allocator(void* allocator, unsigned char priority) {
  c10::Allocator* chosen = allocator ? static_cast<c10::Allocator*>(allocator) : &the_allocator;
  c10::SetCPUAllocator(chosen, priority);
  return c10::GetCPUAllocator() == chosen;
}

void* dali_loaders_batch_memory() { return &the_allocator; }

// Frees the kept blocks; returns how many bytes they held.
size_t dali_loaders_release_kept() {
  std::vector<std::pair<void*, size_t>> blocks;
  {
    Locked lock;
    blocks.swap(kept());
  }
  size_t total = 0;
  for (auto& block : blocks) {
    total += block.second;
    std::free(block.first);
  }
  return total;
}

// (blocks kept, large blocks out): for tests.
void dali_loaders_batch_memory_counts(size_t* kept_blocks, size_t* large_out) {
  Locked lock;
  *kept_blocks = kept().size();
  *large_out = large_sizes().size();
}

}  // extern "C"
