#include "plan/plan_worker.h"

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

#include "plan/plan.h"

namespace zarena_core {

bool lay_out_step(const LearnedStep& s, uint64_t granule, const PlanWindow& where, PlanLayout* out,
                  std::string* failure, uint64_t* plan_ns) noexcept {
  try {
    const auto n = static_cast<uint32_t>(s.items.size());
    std::vector<plan::StepItem> items(n);
    for (uint32_t i = 0; i < n; ++i) {
      const LearnedItem& li = s.items[i];
      switch (li.freed) {
        case LearnedItem::Freed::kSameStep:
          items[i] = plan::StepItem::same_step(li.size, li.before);
          break;
        case LearnedItem::Freed::kNextStep:
          items[i] = plan::StepItem::next_step(li.size, li.before);
          break;
        default:
          items[i] = plan::StepItem::not_planned(li.size);
      }
    }
    plan::StepRequest req;
    req.items = items.data();
    req.count = n;
    req.granule = granule;
    req.obstacles = where.obstacles.data();
    req.obstacle_count = static_cast<uint32_t>(where.obstacles.size());
    req.leftovers = where.leftovers.data();
    req.leftover_count = static_cast<uint32_t>(where.leftovers.size());
    plan::OffsetPlan op;
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = plan::plan_step(req, plan::PlanLimits{}, &op);
    *plan_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    if (!r.is_ok()) {
      *failure = r.message;
      return false;
    }
    out->n = n;
    out->period = op.period_steps;
    out->item_size.resize(n);
    out->item_tag.resize(n);
    out->item_planned.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      out->item_size[i] = s.items[i].size;
      out->item_tag[i] = s.items[i].tag;
      out->item_planned[i] = s.items[i].freed != LearnedItem::Freed::kNotPlanned;
    }
    out->offset = std::move(op.offsets);
    out->check_begin = std::move(op.check_begin);
    out->check_list = std::move(op.check_ids);
    out->peak_bytes = op.peak_bytes;
    out->window = where.window;
    out->obstacles = where.obstacles;
    out->leftovers = where.leftovers;
    out->lower_bound_bytes = op.lower_bound_bytes;
    return true;
  } catch (const std::bad_alloc&) {
    *failure = "out of host memory laying out the plan";
    return false;
  }
}

namespace {

// Never destroyed (a job may be posted from an exit handler).
struct Worker {
  std::mutex mu;
  std::condition_variable work;
  std::deque<std::shared_ptr<PlanJob>> queue;
  std::shared_ptr<PlanJob> running;
  bool started = false;
};

Worker& worker() {
  static Worker* w = new Worker();
  return *w;
}

void finish(PlanJob& job) {
  if (!job.cancelled.load(std::memory_order_acquire)) {
    job.ok =
        lay_out_step(job.step, job.granule, job.where, &job.layout, &job.failure, &job.plan_ns);
  } else {
    job.failure = "cancelled";
  }
  job.done.store(true, std::memory_order_release);
}

void thread_main() {
  pthread_setname_np(pthread_self(), "zarena-plan");
  Worker& w = worker();
  std::unique_lock<std::mutex> lock(w.mu);
  for (;;) {
    w.work.wait(lock, [&] { return !w.queue.empty(); });
    w.running = std::move(w.queue.front());
    w.queue.pop_front();
    std::shared_ptr<PlanJob> job = w.running;
    lock.unlock();
    finish(*job);
    job.reset();
    lock.lock();
    w.running.reset();
  }
}

void fork_prepare() { worker().mu.lock(); }
void fork_parent() { worker().mu.unlock(); }
void fork_child() {
  Worker& w = worker();
  // No thread here: what was queued or running in the parent ends as failed in the child.
  for (auto* list : {&w.queue}) {
    for (auto& j : *list) j->done.store(true, std::memory_order_release);  // ok stays false
    list->clear();
  }
  if (w.running) {
    // Its fields may be half written by the parent's thread: only `done` is touched.
    w.running->done.store(true, std::memory_order_release);
    w.running.reset();
  }
  new (&w.work) std::condition_variable();
  w.started = false;
  w.mu.unlock();
}

}  // namespace

bool post_plan_job(std::shared_ptr<PlanJob> job) noexcept {
  Worker& w = worker();
  try {
    std::lock_guard<std::mutex> lock(w.mu);
    if (!w.started) {
      static const bool hooks = [] {
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        return true;
      }();
      (void)hooks;
      std::thread(thread_main).detach();
      w.started = true;
    }
    w.queue.push_back(std::move(job));
    w.work.notify_one();
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace zarena_core
