// Package zarena is the Go binding of zarena, a GPU memory arena with a C ABI.
//
// An Arena reserves one region (CUDA device memory, or host memory with BackendHost)
// and hands out aligned blocks of it. A training loop uploads its weights, marks the
// step boundary, and resets the arena after every step:
//
//	a, err := zarena.New(zarena.Config{CapacityBytes: 8 << 30})
//	if err != nil { ... }
//	defer a.Close()
//	weights, _ := a.Alloc(n)
//	a.MarkStepBoundary()
//	for step := range steps {
//		err := a.Step(func() error { ... a.Alloc / a.Free ... })
//	}
//
// A DevicePtr is an address in the arena's region, not Go memory: the Go garbage
// collector does not see it, and it is invalid after the Free, the Reset that reclaims
// it, or Close.
//
// Every call is a real cgo call, so a C call that blocks (an overflow allocation stuck
// in the driver) holds one OS thread while the other goroutines and the garbage
// collector keep running. Alloc and Free make exactly one cgo call each and pass no Go
// pointer to C.
//
// Diagnostics (configuration at create, the reset-cadence warning, the first-overflow
// verdict) go to stderr until SetLogger or SetSlogHandler routes them to Go. Go loggers
// are called asynchronously, on one goroutine, in emission order, and never inside a
// binding call: no C call of the package calls back into Go. FlushLogs waits for them.
//
// Linking: cgo finds the library with pkg-config (package "zarena"); set
// PKG_CONFIG_PATH to the directory holding zarena.pc. scripts/go-test.sh in the
// repository generates one for a build tree.
package zarena
