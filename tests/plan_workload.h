// A synthetic training step for the planner's tests and benchmarks (tests/test_plan.cpp,
// bench/bench_plan.cpp): the allocations of one step of a transformer-like model, in order,
// each with the point at which the program frees it.
//   - the batch (inputs, labels) and the loss are rebound each iteration: the new one is
//     allocated while the old one is still referenced, which frees it right after (P = 2);
//   - zero_grad(set_to_none) at the start of the step frees the gradients of the step before;
//   - forward: each op's output, either saved for backward (freed when backward reaches
//     the op, in reverse order) or consumed by the next op; workspaces freed right after;
//   - backward: a gradient per op output, consumed by the op below it, weight gradients
//     kept until the next zero_grad; saved tensors freed mostly, not exactly, in reverse;
//   - the optimizer: per group of parameters, scratch freed right away;
//   - a few tensors the program keeps for longer (metrics): not planned.
// Sizes come from one model's dimensions (tokens x hidden, bf16): activations of a few
// MiB, attention scores larger, statistics and biases of a few KiB; every layer alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "plan/plan.h"

namespace zarena_test {

struct TrainingStepShape {
  uint32_t target_items = 1000;  // about this many allocations (at least one layer's)
  uint32_t rebound = 3;          // tensors rebound each iteration, 0..3; 0 gives P = 1
  uint32_t kept = 2;             // tensors kept beyond the next step (not planned)
  uint64_t seed = 1;
  uint64_t granule = 256;
};

namespace plan_workload_detail {

using zarena_core::plan::StepItem;

class StepBuilder {
 public:
  explicit StepBuilder(uint64_t granule) : granule_(granule) {}
  uint32_t count() const { return static_cast<uint32_t>(items_.size()); }
  uint64_t size(uint32_t id) const { return items_[id].size; }
  uint32_t alloc(uint64_t bytes) {
    const uint64_t size = std::max(granule_, (bytes + granule_ - 1) / granule_ * granule_);
    items_.push_back(StepItem::same_step(size, 0));  // free point set later
    open_.push_back(true);
    return count() - 1;
  }
  void free_now(uint32_t id) { close(id, StepItem::same_step(items_[id].size, count())); }
  void free_next_step(uint32_t id, uint32_t k) {
    close(id, StepItem::next_step(items_[id].size, k));
  }
  void keep(uint32_t id) { close(id, StepItem::not_planned(items_[id].size)); }
  std::vector<StepItem> finish() {
    for (uint32_t id = 0; id < count(); ++id) {
      if (open_[id]) free_now(id);
    }
    return items_;
  }

 private:
  void close(uint32_t id, StepItem item) {
    items_[id] = item;
    open_[id] = false;
  }
  uint64_t granule_;
  std::vector<StepItem> items_;
  std::vector<bool> open_;
};

struct Op {
  uint64_t out;         // output bytes
  bool saved;           // kept for backward
  uint64_t weights[2];  // parameter bytes (weight, bias); 0 = none
  uint32_t workspaces;  // temporaries freed right after the output exists
};

inline std::vector<StepItem> build(const TrainingStepShape& shape, uint32_t layers) {
  std::mt19937_64 rng(shape.seed);
  auto pick = [&](std::initializer_list<uint64_t> v) { return v.begin()[rng() % v.size()]; };
  const uint64_t tokens = pick({512, 1024, 2048, 4096});
  const uint64_t hidden = pick({256, 512, 768, 1024, 2048});
  const uint64_t heads = pick({4, 8, 16});
  const uint64_t seq = pick({128, 256, 512});
  const uint64_t act = tokens * hidden * 2;
  const uint64_t mlp = pick({2, 4});
  // One layer: norm, qkv, scores, softmax, context, proj (+ residual), norm, up, gelu, down.
  const std::vector<Op> layer = {
      {act, true, {hidden * 2, hidden * 2}, 0},
      {tokens * 4 * 2, true, {0, 0}, 0},  // norm statistics
      {3 * act, true, {3 * hidden * hidden * 2, 3 * hidden * 2}, 1},
      {tokens * seq * heads * 2, false, {0, 0}, 0},  // scores, consumed by softmax
      {tokens * seq * heads * 2, true, {0, 0}, 0},
      {act, true, {0, 0}, 1},
      {act, false, {hidden * hidden * 2, hidden * 2}, 0},
      {act, true, {0, 0}, 0},  // the residual sum (kResidual)
      {act, true, {hidden * 2, hidden * 2}, 0},
      {mlp * act, true, {mlp * hidden * hidden * 2, mlp * hidden * 2}, 1},
      {mlp * act, true, {0, 0}, 0},
      {act, false, {mlp * hidden * hidden * 2, hidden * 2}, 1},
      {tokens / 8, true, {0, 0}, 0},  // dropout mask
  };
  constexpr size_t kResidual = 7;
  const Op embedding = {act * 2, true, {0, 0}, 0};
  const Op logits = {tokens * 2 * pick({8000, 32000}) / 8, true, {0, 0}, 1};  // a vocab slice

  StepBuilder b(shape.granule);
  // The batch: the new one is allocated, then the last one's references go.
  for (uint32_t r = 0; r < std::min(shape.rebound, 2u); ++r) {
    const uint32_t id = b.alloc(tokens * 8);
    b.free_next_step(id, id + 1);
  }
  const uint32_t zero_grad = b.count();  // before the next allocation, grads go
  std::vector<uint32_t> kept;
  for (uint32_t k = 0; k < shape.kept; ++k) kept.push_back(b.alloc(256 << k));
  for (uint32_t id : kept) b.keep(id);

  // Forward.
  std::vector<uint32_t> saved;  // by op, layer after layer; kNone when not saved
  constexpr uint32_t kNone = ~0u;
  uint32_t consumed = kNone;  // the last unsaved output, freed once the next op has run
  auto run_op = [&](const Op& op) {
    std::vector<uint32_t> ws;
    for (uint32_t w = 0; w < op.workspaces; ++w) ws.push_back(b.alloc(op.out / 2));
    const uint32_t out = b.alloc(op.out);
    for (uint32_t w : ws) b.free_now(w);
    if (consumed != kNone) b.free_now(consumed);
    consumed = op.saved ? kNone : out;
    saved.push_back(op.saved ? out : kNone);
  };
  run_op(embedding);
  for (uint32_t l = 0; l < layers; ++l) {
    for (const Op& op : layer) run_op(op);
  }
  run_op(logits);
  if (consumed != kNone) b.free_now(consumed);
  if (shape.rebound >= 3) {
    const uint32_t loss = b.alloc(256);
    b.free_next_step(loss, loss + 1);
  }

  // Backward: op by op in reverse, each input gradient consumed by the op below. Autograd
  // does not free saved tensors in exact reverse order: a quarter of them go one op later
  // (saved by two nodes), and a residual's gradient is summed into a temporary.
  uint32_t grad = kNone;
  std::vector<uint32_t> weight_grads, deferred;
  auto back_op = [&](const Op& op, uint32_t saved_out) {
    const uint32_t g = b.alloc(op.out);
    if (grad != kNone) b.free_now(grad);
    grad = g;
    for (uint64_t w : op.weights) {
      if (w != 0) weight_grads.push_back(b.alloc(w));
    }
    if (op.workspaces > 0) b.free_now(b.alloc(op.out / 2));
    for (uint32_t d : deferred) b.free_now(d);
    deferred.clear();
    if (saved_out == kNone) return;
    if (rng() % 4 == 0) {
      deferred.push_back(saved_out);
    } else {
      b.free_now(saved_out);
    }
  };
  size_t at = saved.size();
  back_op(logits, saved[--at]);
  for (uint32_t l = layers; l-- > 0;) {
    for (size_t o = layer.size(); o-- > 0;) {
      back_op(layer[o], saved[--at]);
      if (o == kResidual) b.free_now(b.alloc(act));
    }
  }
  back_op(embedding, saved[--at]);
  for (uint32_t d : deferred) b.free_now(d);
  if (grad != kNone) b.free_now(grad);
  for (uint32_t g : weight_grads) b.free_next_step(g, zero_grad);

  // The optimizer, eight parameters at a time: two scratch tensors over the group.
  for (size_t first = 0; first < weight_grads.size(); first += 8) {
    uint64_t bytes = 0;
    for (size_t g = first; g < std::min(first + 8, weight_grads.size()); ++g) {
      bytes += b.size(weight_grads[g]);
    }
    const uint32_t s1 = b.alloc(bytes);
    const uint32_t s2 = b.alloc(bytes);
    b.free_now(s1);
    b.free_now(s2);
  }
  return b.finish();
}

}  // namespace plan_workload_detail

// A request over `items` (a view: they must outlive it).
inline zarena_core::plan::StepRequest step_request(
    const std::vector<zarena_core::plan::StepItem>& items, uint64_t granule = 256) {
  return {items.data(), static_cast<uint32_t>(items.size()), granule};
}

// The step's allocations in order. Deterministic for a given shape.
inline std::vector<zarena_core::plan::StepItem> training_step(const TrainingStepShape& shape) {
  using plan_workload_detail::build;
  const size_t one = build(shape, 1).size();
  const size_t per_layer = build(shape, 2).size() - one;
  const uint32_t layers =
      shape.target_items > one
          ? static_cast<uint32_t>(1 + (shape.target_items - one + per_layer / 2) / per_layer)
          : 1;
  return build(shape, layers);
}

}  // namespace zarena_test
