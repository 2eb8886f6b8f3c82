// Test-only: faults armed for the next backend the engine wraps, so that failures at
// create (reserve_region) are testable through zarena_create. Not part of any
// production path; the engine only consumes the plan (FaultInjectingBackend's constructor).
#pragma once

#include "backend/backend_faults.h"

namespace zarena_core {

// The next FaultInjectingBackend constructed in this process (the next zarena_create
// with a host backend) starts with `plan` armed; the plan is used once.
void arm_faults_for_next_create(const FaultPlan& plan) noexcept;
// Drops a plan that no create consumed (test teardown).
void disarm_faults_for_next_create() noexcept;

}  // namespace zarena_core
