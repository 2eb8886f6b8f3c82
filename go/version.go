package zarena

/*
#include "shim.h"

static inline const char* shim_version_string(void) { return zarena_version_string(); }
static inline uint32_t shim_version_number(void) { return zarena_version_number(); }
*/
import "C"

// HeaderVersion is ZARENA_VERSION_NUMBER of the header this package was compiled
// against (MAJOR*10000 + MINOR*100 + PATCH).
const HeaderVersion = uint32(C.ZARENA_VERSION_NUMBER)

// Version is the version of the library actually loaded, as "MAJOR.MINOR.PATCH" and as
// a number comparable with HeaderVersion ("", 0 when it could not be loaded: see
// Available).
func Version() (string, uint32) {
	if ready() != nil {
		return "", 0
	}
	return C.GoString(C.shim_version_string()), uint32(C.shim_version_number())
}
