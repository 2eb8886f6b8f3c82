//go:build !zarena_portable

package zarena

// portableForced: this test binary was built with the zarena_portable tag.
const portableForced = false
