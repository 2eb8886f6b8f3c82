//go:build zarena_static && zarena_dlopen

package zarena

// Both tags at once cannot be honoured: say so at compile time.
var _ int = "zarena: the build tags zarena_static and zarena_dlopen exclude each other; choose one"
