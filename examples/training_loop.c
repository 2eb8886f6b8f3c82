/*
 * training_loop.c: the failure zarena was built to explain, and its fix.
 *
 * A training loop with per-sample gradient accumulation runs on a 64 MiB arena (host
 * memory, so no GPU is needed):
 *
 *   phase 1  uploads the weights, marks the step boundary, then runs one pass per sample
 *            and NEVER resets. Every pass leaves its activations behind, so the arena
 *            fills up. Each pass begins with zarena_step_begin, as an engine does at the
 *            top of a step, so zarena knows the steps for a fact: at the second sample
 *            it warns on stderr ("arena.reset_cadence"). When the arena is full the
 *            overflow is refused, and the error itself says why: zarena_last_error() ends
 *            with "verdict=never_reset; fix: ..." (zarena_diagnose has the same at any
 *            time), and "arena.first_overflow" is on stderr before the call returns.
 *   phase 2  the same loop with zarena_reset after every sample: it runs as long as you
 *            like with zero overflows and no warning.
 *
 * With --expandable it shows instead what an expandable arena does for a size nobody
 * guessed right: the loop on a fixed 5 MiB arena overflows in every step, while an
 * expandable arena (up to 1 GiB of address space, memory committed 2 MiB at a time)
 * grows to the step's working set in its first step and never overflows. It uses the
 * GPU when there is one (ZARENA_BACKEND_AUTO), host memory otherwise.
 *
 * No log callback is registered: the diagnosis reaches stderr on its own.
 *
 * With a file name argument, phase 1 records a trace of every arena event into it
 * (cfg.trace_file, as ZARENA_TRACE_FILE does); `zarena-replay FILE` then says how big
 * the arena would have had to be and what a reset per sample would change, and
 * `zarena-replay FILE --svg arena.svg` draws it. Buffers carry tags (weights, act, ...),
 * which the live-block listing and the picture show.
 * With --expandable instead: a fixed arena sized too small overflowing in every step,
 * then an expandable arena growing instead.
 * Build and run: ./scripts/demo.sh  (or ./scripts/demo.sh --expandable)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zarena/zarena.h>

#define KIB ((uint64_t)1024)
#define MIB (1024 * KIB)
#define LAYERS 4
#define PHASE2_SAMPLES 100

/* Stops the program with a readable message when a call that must succeed fails. */
static void check(zarena_status s, const char* what) {
  if (s != ZARENA_OK) {
    fprintf(stderr, "%s failed: %s: %s\n", what, zarena_status_string(s), zarena_last_error());
    exit(1);
  }
}

/* Tags name what each buffer is for (registered once; the hot path stores an integer). */
enum { TAG_WEIGHTS, TAG_GRADS, TAG_INPUT, TAG_ACT, TAG_SCRATCH, TAG_GRAD_ACT, TAG_GRAD_W, TAGS };
static const char* const tag_names[TAGS] = {"weights", "grads",    "input", "act",
                                            "scratch", "grad.act", "grad.w"};
static uint32_t tags[TAGS];

static zarena_status alloc_tagged(zarena* arena, uint64_t size, int tag, void** out) {
  zarena_block b;
  zarena_status s = zarena_alloc_ex(arena, size, tags[tag], &b);
  *out = b.ptr;
  return s;
}

static zarena* new_arena(const char* name, const char* trace_file) {
  zarena_config cfg;
  zarena* arena = NULL;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_HOST;
  cfg.capacity_bytes = 64 * MIB;
  cfg.overflow_policy = ZARENA_OVERFLOW_REFUSE; /* fail cleanly instead of spilling */
  cfg.name = name;
  cfg.trace_file = trace_file; /* "" or NULL: no trace */
  check(zarena_create(&cfg, &arena), "zarena_create");
  return arena;
}

/* Weights and the gradient accumulators: allocated once, kept below the step boundary. */
static void upload_weights(zarena* arena, void* weights[LAYERS], void* grads[LAYERS]) {
  int l;
  for (l = 0; l < LAYERS; ++l) {
    check(alloc_tagged(arena, 512 * KIB, TAG_WEIGHTS, &weights[l]), "zarena_alloc(weights)");
    check(alloc_tagged(arena, 512 * KIB, TAG_GRADS, &grads[l]), "zarena_alloc(gradients)");
  }
  check(zarena_mark_step_boundary(arena), "zarena_mark_step_boundary");
}

/* One forward+backward pass for one sample, with the allocation pattern of a tensor
 * engine: every op output is a new buffer; scratch buffers are freed at once; the
 * activations and activation gradients are left for the arena to reclaim at the next
 * reset (that is what the reset is for). Returns ZARENA_OK or the failing status. */
static zarena_status run_sample(zarena* arena) {
  void* input;
  void* act[LAYERS];
  void* scratch;
  void* loss;
  void* grad_act;
  void* grad_w;
  zarena_status s;
  int l;

  if ((s = alloc_tagged(arena, 96 * KIB, TAG_INPUT, &input)) != ZARENA_OK) return s;
  for (l = 0; l < LAYERS; ++l) { /* forward */
    if ((s = alloc_tagged(arena, 64 * KIB, TAG_SCRATCH, &scratch)) != ZARENA_OK) return s;
    if ((s = alloc_tagged(arena, (uint64_t)(160 + 32 * l) * KIB, TAG_ACT, &act[l])) != ZARENA_OK)
      return s;
    check(zarena_free(arena, scratch), "zarena_free(scratch)");
  }
  if ((s = alloc_tagged(arena, 4 * KIB, TAG_ACT, &loss)) != ZARENA_OK) return s;
  for (l = LAYERS - 1; l >= 0; --l) { /* backward */
    if ((s = alloc_tagged(arena, (uint64_t)(160 + 32 * l) * KIB, TAG_GRAD_ACT, &grad_act)) !=
        ZARENA_OK)
      return s;
    if ((s = alloc_tagged(arena, 512 * KIB, TAG_GRAD_W, &grad_w)) != ZARENA_OK) return s;
    /* ... accumulate grad_w into grads[l] ... then the temporary goes back */
    check(zarena_free(arena, grad_w), "zarena_free(grad_w)");
  }
  return ZARENA_OK;
}

/* zarena_format_* write into a caller's buffer; the size can grow between asking and
 * writing (other threads allocate), so ask again until it fits. Returns malloc'ed text. */
static char* format_text(zarena* arena, int live_blocks) {
  size_t need = 0;
  char* buf = NULL;
  zarena_status s;
  for (;;) {
    size_t cap = need + need / 4;
    free(buf);
    buf = cap > 0 ? malloc(cap) : NULL;
    if (cap > 0 && buf == NULL) return NULL;
    s = live_blocks ? zarena_format_live_blocks(arena, ZARENA_FORMAT_TEXT, buf, cap, &need)
                    : zarena_format_stats(arena, ZARENA_FORMAT_TEXT, buf, cap, &need);
    if (s == ZARENA_OK && buf != NULL) return buf;
    if (s != ZARENA_OK && need <= cap) {
      check(s, "zarena_format");
    }
  }
}

/* The library's own stats table (ZARENA_FORMAT_JSON gives the same fields as JSON). */
static void print_stats(const char* title, zarena* arena) {
  char* text = format_text(arena, 0);
  printf("\n%s\n%s\n", title, text != NULL ? text : "(out of memory)");
  free(text);
}

/* The figures that show the fix worked, in two lines (the full table is above). */
static void print_summary(zarena* arena, int samples) {
  zarena_stats st;
  st.struct_size = sizeof st;
  check(zarena_get_stats(arena, &st), "zarena_get_stats");
  printf("%d samples done: high water %.0f%% of the arena, %" PRIu64 " resets, %" PRIu64
         " blocks reused,\n%" PRIu64 " overflow allocations, %" PRIu64
         " live blocks (the weights and gradients below the floor)\n",
         samples, 100.0 * (double)st.high_water_bytes / (double)st.capacity_bytes, st.resets,
         st.reuses, st.overflow_allocs, st.live_allocs);
}

/* The first lines of the live-block listing: what is still allocated, and what for. */
static void print_live_blocks(zarena* arena, int lines) {
  char* text = format_text(arena, 1);
  char* p = text;
  int n = 0;
  if (text == NULL) return;
  while (*p != '\0' && n < lines) {
    char* nl = strchr(p, '\n');
    if (nl == NULL) break;
    printf("%.*s\n", (int)(nl - p), p);
    p = nl + 1;
    ++n;
  }
  if (*p != '\0') printf("  ...\n");
  free(text);
}

/* Prints s indented, broken at blanks into lines of at most `width` characters. */
static void print_wrapped(const char* s, int width) {
  while (*s != '\0') {
    int n = (int)strlen(s);
    if (n > width) {
      n = width;
      while (n > 0 && s[n] != ' ') --n;
      if (n == 0) n = width;
    }
    printf("    %.*s\n", n, s);
    s += n;
    while (*s == ' ') ++s;
  }
}

/* The error of a call that failed because the arena was full carries the diagnosis at its
 * end, in a stable format: "... verdict=<name>; fix: <one sentence>". */
static void print_verdict_from_error(const char* message) {
  const char* v = strstr(message, "verdict=");
  const char* fix = v != NULL ? strstr(v, "; fix: ") : NULL;
  if (fix == NULL) {
    printf("  (no verdict in the message)\n");
    return;
  }
  printf("  verdict: %.*s\n  fix:\n", (int)(fix - (v + 8)), v + 8);
  print_wrapped(fix + 7, 76);
}

/* How full the arena has been at its highest (the top offset over the capacity). */
static double fill_percent(zarena* arena) {
  zarena_stats st;
  st.struct_size = sizeof st;
  check(zarena_get_stats(arena, &st), "zarena_get_stats");
  return 100.0 * (double)st.high_water_bytes / (double)st.capacity_bytes;
}

/* --expandable: the same per-sample loop (with resets) on an arena whose size was guessed
 * too small, fixed and then expandable. */
static zarena* sized_arena(const char* name, int expandable) {
  zarena_config cfg;
  zarena* arena = NULL;
  zarena_config_init(&cfg);
  cfg.backend = ZARENA_BACKEND_AUTO; /* the GPU when there is one */
  cfg.overflow_policy = ZARENA_OVERFLOW_SYNC;
  cfg.name = name;
  if (expandable) {
    cfg.flags |= ZARENA_FLAG_EXPANDABLE;
    cfg.capacity_bytes = 1024 * MIB; /* the most it may take: address space, not memory */
    cfg.commit_chunk_bytes = 2 * MIB;
  } else {
    cfg.capacity_bytes = 5 * MIB; /* a guess: the weights fit, a step does not */
  }
  check(zarena_create(&cfg, &arena), "zarena_create");
  return arena;
}

static int expandable_demo(void) {
  void* weights[LAYERS];
  void* grads[LAYERS];
  int mode, sample;
  for (mode = 0; mode < 2; ++mode) {
    zarena* arena = sized_arena(mode ? "expandable" : "fixed-5MiB", mode);
    zarena_stats st;
    printf("=== %s ===\n", mode ? "expandable arena, up to 1 GiB, committed 2 MiB at a time"
                                : "fixed 5 MiB arena (a size guessed too small)");
    upload_weights(arena, weights, grads);
    st.struct_size = sizeof st;
    for (sample = 1; sample <= 8; ++sample) {
      check(run_sample(arena), "run_sample");
      check(zarena_get_stats(arena, &st), "zarena_get_stats");
      if (sample <= 3 || sample == 8)
        printf("sample %d: committed %6.1f MiB, overflow allocations so far %3" PRIu64 "\n", sample,
               (double)st.committed_bytes / MIB, st.overflow_allocs);
      check(zarena_reset(arena), "zarena_reset");
    }
    printf("%s: %" PRIu64 " overflow allocations, %" PRIu64 " commits (%.1f MiB committed)\n\n",
           mode ? "expandable" : "fixed", st.overflow_allocs, st.commit_events,
           (double)st.committed_bytes / MIB);
    check(zarena_destroy(arena), "zarena_destroy");
  }
  printf(
      "The fixed arena overflowed in every step (each overflow is a cudaMalloc on a GPU).\n"
      "The expandable one grew to the step's working set during the first step and then\n"
      "served every step from the region: no size to guess.\n");
  return 0;
}

int main(int argc, char** argv) {
  void* weights[LAYERS];
  void* grads[LAYERS];
  zarena* arena;
  int sample, t;
  zarena_status s = ZARENA_OK;
  const char* trace_file = argc > 1 ? argv[1] : NULL;

  /* Keep stdout and zarena's stderr lines in order when both go to a pipe. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (t = 0; t < TAGS; ++t)
    check(zarena_tag_register(tag_names[t], &tags[t]), "zarena_tag_register");
  if (trace_file != NULL && strcmp(trace_file, "--expandable") == 0) return expandable_demo();

  printf(
      "zarena writes its diagnostics to stderr (the lines with a timestamp): this program\n"
      "registers no log callback, like a host whose logger discards them.\n\n");
  printf("=== phase 1: per-sample passes, no zarena_reset (the bug) ===\n");
  if (trace_file != NULL) printf("recording a trace of phase 1 into %s\n", trace_file);
  arena = new_arena("phase1", trace_file);
  upload_weights(arena, weights, grads);
  for (sample = 1; sample <= 1000; ++sample) {
    check(zarena_step_begin(arena), "zarena_step_begin"); /* an engine's step starts here */
    s = run_sample(arena);
    if (s != ZARENA_OK) break;
    if (sample <= 4 || sample % 10 == 0)
      printf("sample %3d done, arena %3.0f%% full\n", sample, fill_percent(arena));
  }
  if (s != ZARENA_OK) {
    zarena_diagnosis d;
    printf("sample %3d: zarena_alloc failed: %s; the error ends with the diagnosis:\n", sample,
           zarena_status_string(s));
    print_verdict_from_error(zarena_last_error());
    d.struct_size = sizeof d;
    check(zarena_diagnose(arena, &d), "zarena_diagnose");
    printf("  zarena_diagnose: verdict %s after %" PRIu64 " steps that kept %.1f MiB\n", d.verdict,
           d.steps, (double)d.kept_bytes / MIB);
    printf(
        "phase 1 stopped: the arena filled up after %d samples without a reset.\n"
        "zarena said so on stderr: arena.reset_cadence at the second sample (the steps\n"
        "were counted with zarena_step_begin), then arena.first_overflow with verdict\n"
        "never_reset when it was full; and the error above carries the same verdict.\n",
        sample - 1);
  }
  print_stats("phase 1 stats (zarena_format_stats):", arena);
  printf("what is still live (zarena_format_live_blocks), first lines:\n");
  print_live_blocks(arena, 8);
  check(zarena_destroy(arena), "zarena_destroy");

  printf("\n=== phase 2: the fix: zarena_reset after every sample ===\n");
  arena = new_arena("phase2", NULL);
  upload_weights(arena, weights, grads);
  check(zarena_reset_peak_stats(arena), "zarena_reset_peak_stats"); /* measure the loop */
  for (sample = 1; sample <= PHASE2_SAMPLES; ++sample) {
    check(zarena_step_begin(arena), "zarena_step_begin");
    check(run_sample(arena), "run_sample");
    check(zarena_reset(arena), "zarena_reset"); /* weights and gradients stay: floor */
  }
  print_summary(arena, PHASE2_SAMPLES);
  check(zarena_destroy(arena), "zarena_destroy");
  return 0;
}
