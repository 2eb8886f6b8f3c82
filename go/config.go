package zarena

/*
#include "shim.h"
*/
import "C"

// The Config struct, the Flag constants and the conversions to and from zarena_config
// are generated from the library's table of configuration fields
// (config_fields_gen.go); this file holds what is not per field.

// OverflowUnlimited as Config.OverflowLimitBytes lifts the cap on live overflow bytes
// (ZARENA_OVERFLOW_UNLIMITED); 0 keeps the default cap, the capacity.
const OverflowUnlimited uint64 = ^uint64(0)

// Backend selects where the arena's region lives (ZARENA_BACKEND_*).
type Backend int32

const (
	BackendAuto Backend = 0 // CUDA when a device is usable, else host
	BackendHost Backend = 1 // page-backed host memory: CPU engines, tests
	BackendCUDA Backend = 2 // device memory on Config.Device
)

func (b Backend) String() string {
	if b >= 0 && int(b) < len(backendNames) {
		return backendNames[b]
	}
	return "invalid"
}

// OverflowPolicy decides what happens when the region is full (ZARENA_OVERFLOW_*).
type OverflowPolicy int32

const (
	OverflowDefault OverflowPolicy = 0 // ASYNC when a stream is configured, else SYNC
	OverflowAsync   OverflowPolicy = 1 // stream-ordered pool
	OverflowSync    OverflowPolicy = 2 // synchronous allocation; refused during capture
	OverflowRefuse  OverflowPolicy = 3 // region full => ErrOutOfMemory
)

func (p OverflowPolicy) String() string {
	if p == OverflowCustom {
		return "custom"
	}
	if p >= 0 && int(p) < len(overflowPolicyNames) {
		return overflowPolicyNames[p]
	}
	return "invalid"
}

// Flags are ZARENA_FLAG_* bits (the Flag constants).
type Flags uint32

// ConfigFields is a set of Config fields (the Field constants): Config.Set names the
// fields whose value is taken as given, zero included, instead of falling back to the
// environment.
type ConfigFields uint64

// DefaultConfig returns the configuration a zero Config resolves to: the library's
// defaults with the environment applied (the zero Config when the library could not be
// loaded: see Available).
func DefaultConfig() Config {
	if ready() != nil {
		return Config{}
	}
	c := C.shim_config_defaults()
	return configFromC(&c)
}
