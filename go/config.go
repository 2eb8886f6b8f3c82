package zarena

/*
#include "zgo.h"
*/
import "C"

import "time"

// Backend selects where the arena's region lives (ZARENA_BACKEND_*).
type Backend int32

const (
	BackendAuto Backend = 0 // CUDA when a device is usable, else host
	BackendHost Backend = 1 // page-backed host memory: CPU engines, tests
	BackendCUDA Backend = 2 // device memory on Config.Device
)

func (b Backend) String() string {
	switch b {
	case BackendAuto:
		return "auto"
	case BackendHost:
		return "host"
	case BackendCUDA:
		return "cuda"
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
	switch p {
	case OverflowDefault:
		return "default"
	case OverflowAsync:
		return "async"
	case OverflowSync:
		return "sync"
	case OverflowRefuse:
		return "refuse"
	}
	return "invalid"
}

// Flags are ZARENA_FLAG_* bits.
type Flags uint32

const (
	FlagManaged         Flags = 0x1 // region from managed memory where supported
	FlagPoison          Flags = 0x2 // fill freed and reclaimed blocks with 0xA5
	FlagOverflowPrewarm Flags = 0x4 // make the retained overflow size resident at create
)

// Config mirrors zarena_config. The zero value means "the library's defaults and the
// environment" (ZARENA_*, ZERFOO_ARENA_SIZE_GB, ... as documented in zarena.h): New
// starts from zarena_config_init and overrides only the fields that are non-zero here.
// Consequently a zero field cannot override an environment setting (Device 0 while
// ZARENA_DEVICE=1 is set yields device 1); Flags are OR-ed into the environment's.
type Config struct {
	Backend             Backend
	Device              int32  // CUDA device ordinal
	CapacityBytes       uint64 // region size (library default 1 GiB)
	Alignment           uint64 // power of two in [8, 1 GiB] (default 256)
	OverflowPolicy      OverflowPolicy
	OverflowRetainBytes uint64  // overflow pool release threshold (default: capacity)
	OverflowLimitBytes  uint64  // cap on live overflow bytes (default: none)
	Stream              uintptr // cudaStream_t the memory is used on
	Flags               Flags
	Name                string        // label in log records (default "zarena")
	OverflowSlow        time.Duration // overflow calls slower than this log "overflow.slow"
}

// DefaultConfig returns the configuration a zero Config resolves to: the library's
// defaults with the environment applied.
func DefaultConfig() Config {
	c := C.zgo_config_defaults()
	cfg := Config{
		Backend:             Backend(c.backend),
		Device:              int32(c.device),
		CapacityBytes:       uint64(c.capacity_bytes),
		Alignment:           uint64(c.alignment),
		OverflowPolicy:      OverflowPolicy(c.overflow_policy),
		OverflowRetainBytes: uint64(c.overflow_retain_bytes),
		OverflowLimitBytes:  uint64(c.overflow_limit_bytes),
		Flags:               Flags(c.flags),
		OverflowSlow:        time.Duration(c.overflow_slow_ns),
	}
	if c.name != nil {
		cfg.Name = C.GoString(c.name)
	}
	return cfg
}

// toC fills the C config: defaults and environment first, then the non-zero fields.
// The caller frees the returned name (nil when Name is empty).
func (cfg *Config) toC() (C.zarena_config, *C.char) {
	c := C.zgo_config_defaults()
	if cfg.Backend != 0 {
		c.backend = C.int32_t(cfg.Backend)
	}
	if cfg.Device != 0 {
		c.device = C.int32_t(cfg.Device)
	}
	if cfg.CapacityBytes != 0 {
		c.capacity_bytes = C.uint64_t(cfg.CapacityBytes)
	}
	if cfg.Alignment != 0 {
		c.alignment = C.uint64_t(cfg.Alignment)
	}
	if cfg.OverflowPolicy != 0 {
		c.overflow_policy = C.int32_t(cfg.OverflowPolicy)
	}
	if cfg.OverflowRetainBytes != 0 {
		c.overflow_retain_bytes = C.uint64_t(cfg.OverflowRetainBytes)
	}
	if cfg.OverflowLimitBytes != 0 {
		c.overflow_limit_bytes = C.uint64_t(cfg.OverflowLimitBytes)
	}
	c.flags |= C.uint32_t(cfg.Flags)
	if cfg.OverflowSlow > 0 {
		c.overflow_slow_ns = C.uint64_t(cfg.OverflowSlow.Nanoseconds())
	}
	var name *C.char
	if cfg.Name != "" {
		name = C.CString(cfg.Name)
		c.name = name
	}
	return c, name
}
