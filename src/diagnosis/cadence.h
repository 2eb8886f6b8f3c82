// Reset-cadence detector: notices a program running step after step without resetting,
// before the arena overflows. It is the guess the arena makes when the program does not
// say where its steps begin (zarena_step_begin turns the guess into a fact: arena.cpp).
//
// Signal: training steps (and per-sample passes) issue the same sequence of request sizes
// every time. The detector records the first kAnchorLen request sizes of the epoch (the
// "anchor": the opening of the first step) and watches the stream for that sequence
// again (KMP matching, O(1) amortised per request, fixed memory). Each time it recurs a
// new step has started ("restart").
//
// Growth is measured in live bytes, not in the top: a loop that frees every block it
// allocates (a general-purpose workload: shapes vary, nothing is reset) moves the top up
// through fragmentation while its live bytes stay put, and must never be told to reset.
// For each step the detector keeps the lowest live bytes seen (the "trough": what the step
// could not give back); a warning needs the troughs to rise across kGrowingRestartsToWarn
// consecutive steps and to have risen by capacity / kMinShareDivisor in all. A workload
// whose troughs do not rise (every block freed; optimizer state created once) stays quiet
// however its top moves. Consequences, by design:
//   - one big first step never repeats its opening, so it stays quiet however large;
//   - a constant-size stream gives an anchor of one size, which is discarded and
//     re-recorded: it never counts as a step;
//   - a loop that resets every step is quiet: the arena disarms the detector at its first
//     reset (and re-arms it only in "resumed" mode, below);
//   - per-sample passes without reset warn 8 requests into the fourth pass (the troughs of
//     passes 1..3 rose twice), once the passes have kept capacity/64 (1.6 %).
// One size after a boundary: a constant-size stream says nothing about steps (one step
// may allocate many blocks of one size), except after zarena_mark_step_boundary with no
// free: the program set a floor to come back to, and a run of one size that fills half the
// space above it without a free or a reset is taken as one block kept per step. A run of
// one size from the arena's creation, with no free and no reset (a newcomer's first loop)
// does not warn (it may be one step's buffers), but names the overflow never_reset.
// Anchoring: zarena_mark_step_boundary says "steps start here", so a boundary marked
// before any restart re-anchors (weights uploaded before it never recur).
// The previous anchor stays armed as well, so a program that marks a boundary after
// every step (and never resets) is still recognised.
// A program that uploads persistent data (weights) without a boundary anchors on that
// upload, which never recurs. An upload frees nothing and a step does, so the first free
// of an epoch, while no restart has been seen, arms a late anchor: the requests after it
// lie inside the first step and recur in every later one. Repeats after a free can also be
// layers inside one step (a forward pass keeping activations), so the late anchor is held
// to what a step that frees does: a recurrence with no free since the one before is not a
// step (it is dropped, and the late anchor armed again at the next free); when live bytes
// fall below where its first step began, what the "steps" kept was given back (the layers
// of a step that frees everything: PyTorch, a general-purpose workload) and the guess
// stops for the epoch; and a warning that rests on it alone needs more evidence
// (kLateGrowingRestartsToWarn rising troughs, capacity / kLateShareDivisor kept). Its
// restarts still count for the first-overflow verdict until withdrawn.
//
// Counting steps as the loop counts them: a step is the stretch between two restarts
// (step_allocs requests). The anchor may begin inside a step (the late anchor) or span
// several short steps, so at the first restart the detector matches the requests before
// the anchor against the same requests one step later (a history of kHistoryLen sizes):
// where they stop matching, the first step began. Steps are then counted from there:
// exact for steps of up to kHistoryLen - kAnchorLen requests.
//
// Resumed mode (resume()): after resets, an epoch that grows well past the peaks of the
// epochs before it may be a loop that stopped resetting. The arena arms the detector with
// the opening those epochs shared; it counts restarts and troughs from there as above, and
// its warning means "reset stopped".
//
// Threads: the arena feeds the detector every request and free, in the order they reach
// it; one program order (however many OS threads carry it) gives one verdict. Threads
// running at once interleave their calls in no fixed order: the arena stops the guess
// when the stream changes thread often (Arena::diag_interleaved_d); a loop that resets
// never warns in normal mode (the arena's reset gate does not depend on the order). After
// kGuessLimit requests without a step the guess stops.
// Known blind spots: a step whose opening requests belong to a block that repeats inside
// the step (e.g. a model whose very first allocations are layer 1's and whose activations
// stay live) looks like repeated steps; real steps usually open with the input upload.
// Layers that each free a temporary look, within the first step of a program that frees
// everything, like steps that free and keep: the guess is withdrawn at that step's end,
// but a warning may precede it. zarena_step_begin (facts) or ZARENA_FLAG_NO_RESETS (a
// program that frees everything and never resets, as zarena.torch) avoids guessing.
//
// Why these numbers: 8 sizes make an accidental match among varied sizes negligible yet
// fit steps of only a few requests (shorter steps still match across their repeats).
// Two rising troughs, not one, so a single jump (state created once, at the first step)
// never warns. capacity/64: a pile smaller than that is no threat yet (a program that
// keeps little per step is told later, with over 98 % of the space still free).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zarena_core {

class CadenceDetector {
 public:
  static constexpr int kAnchorLen = 8;
  static constexpr uint64_t kMinShareDivisor = 64;
  static constexpr uint64_t kGrowingRestartsToWarn = 2;
  static constexpr uint64_t kLateGrowingRestartsToWarn = 3;
  static constexpr uint64_t kLateShareDivisor = 16;
  static constexpr size_t kHistoryLen = 1024;
  // A run of requests of one size after a step boundary, none freed, counts as one block
  // per step once it is this long and has filled half the space above the boundary.
  static constexpr uint64_t kUniformRunMin = 8;
  // Requests watched without a step recognised, after which the guess stops (an arena
  // used from several threads at once, whose interleaved requests never repeat exactly,
  // then stops paying for it).
  static constexpr uint64_t kGuessLimit = 1ull << 22;

  explicit CadenceDetector(uint64_t capacity) : capacity_(capacity) { anchors_[0].start(0); }

  // One request the region served: size is the aligned size, top the highest block end
  // after it. Returns true exactly once, when the warning should be emitted.
  bool on_alloc(uint64_t size, uint64_t top);
  // A region block of `size` bytes was freed.
  void on_free(uint64_t size);
  // A reset: forget the epoch's steps.
  void on_reset(uint64_t top);
  // zarena_mark_step_boundary at this top.
  void on_step_boundary(uint64_t top);
  // Resumed mode: watch for `opening` (kAnchorLen sizes, the opening the earlier epochs
  // shared) from now on; live bytes and troughs count from here.
  void resume(const uint64_t* opening, uint64_t top);

  bool resumed() const { return resumed_; }
  // Since the last zarena_mark_step_boundary (or the arena's creation, with no reset
  // since): requests that were all of one size (its value: uniform_size) with no free
  // among them; 0 when another size, a free or a reset came. A program that marks a
  // boundary means to come back to it with a reset: such a run that never does keeps one
  // block per step. uniform_marked(): the run began at a boundary (only such a run warns).
  uint64_t uniform_run() const { return run_uniform_ ? run_count_ : 0; }
  uint64_t uniform_size() const { return run_size_; }
  bool uniform_marked() const { return run_marked_; }
  // Nothing more to find: the late steps were withdrawn, or kGuessLimit requests passed
  // without a step. The arena then stops feeding the detector.
  bool gave_up() const;
  bool warned() const { return warned_; }
  uint64_t restarts() const { return restarts_; }        // in this epoch
  uint64_t step_allocs() const { return step_allocs_; }  // requests per step (last one)
  // Steps begun since the recognised steps began (the first is 1; 0: none recognised).
  // In resumed mode 0: the arena counts those steps from the epochs before.
  uint64_t steps() const;
  // Bytes the steps kept: the lowest live bytes of the step now running minus those of
  // the first recognised step (0 when no restart was seen, or none grew).
  uint64_t kept_bytes() const;
  // Rise of the troughs from the first recognised step to the last one completed.
  uint64_t grown_bytes() const;
  // What one step kept: grown_bytes over the steps between the two troughs (the first
  // trough may lie several steps before the first restart: the steps the anchor took to
  // recur). 0 when not known.
  uint64_t step_kept_bytes() const;
  // Average top growth per step, and the steps left at that rate until the top reaches
  // the capacity (0: not known yet).
  uint64_t top_growth_per_step() const;
  uint64_t steps_to_full(uint64_t top) const;

 private:
  struct Anchor {
    uint64_t sizes[kAnchorLen];
    uint8_t fail[kAnchorLen];  // KMP failure function over sizes
    int recorded = 0;
    int match = 0;
    bool armed = false;     // recording or matching
    uint64_t begin_at = 0;  // index of its first request
    void start(uint64_t at);
    // Returns true when the anchor just became complete and usable.
    bool record(uint64_t size, uint64_t index);
    void prepare();  // computes fail[] over a complete sizes[]
    // Returns true when the stream just completed another occurrence of the anchor.
    bool feed(uint64_t size);
  };

  void begin(uint64_t top);  // a new observation starts here (anchor start)
  // What on_reset and resume share, once they set up anchors_[0]: the other anchors
  // disarmed, no warning, no history and no live bytes before top; then begin(top).
  void begin_epoch(uint64_t top);
  void first_restart(const Anchor& a);

  uint64_t capacity_;
  // [0] the current anchor, [1] the one before the last boundary, [2] the late anchor
  Anchor anchors_[3];
  bool late_tried_ = false;  // the late anchor was armed in this epoch already
  bool late_only_ = true;    // the steps were recognised by the late anchor
  bool resumed_ = false;
  bool warned_ = false;
  uint64_t allocs_ = 0;
  uint64_t history_[kHistoryLen] = {};
  uint64_t history_from_ = 0;  // requests before this index belong to no step (boundary)
  uint64_t restarts_ = 0;
  uint64_t begun_at_ = 0;      // request index where the current observation began
  uint64_t window_frees_ = 0;  // frees since the last restart (or the late anchor's opening)
  bool withdrawn_ = false;     // late steps gave back what they kept: no more guessing
  bool run_uniform_ = true;    // see uniform_run(): from the creation on
  bool run_marked_ = false;    // the run began at a step boundary
  uint64_t run_count_ = 0, run_size_ = 0, run_start_top_ = 0;
  uint64_t growing_ = 0;     // consecutive restarts whose trough rose
  uint64_t mark_alloc_ = 0;  // request index at the last restart
  uint64_t step_allocs_ = 0;
  uint64_t origin_ = 0;  // request index where the first recognised step began
  // Live bytes as the detector saw them (region blocks; relative in resumed mode).
  int64_t live_ = 0;
  int64_t window_min_ = 0;      // lowest live bytes since the last restart (or start)
  uint64_t window_min_at_ = 0;  // the request index when it was reached
  int64_t first_trough_ = 0, last_trough_ = 0;
  uint64_t first_trough_at_ = 0, last_trough_at_ = 0;  // their request indices
  uint64_t top_ = 0;                                   // the highest top seen
  uint64_t start_top_ = 0, first_restart_top_ = 0, last_restart_top_ = 0;
};

}  // namespace zarena_core
