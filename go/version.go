package zarena

/*
#include "zgo.h"
*/
import "C"

// HeaderVersion is ZARENA_VERSION_NUMBER of the header this package was compiled
// against (MAJOR*10000 + MINOR*100 + PATCH).
const HeaderVersion = uint32(C.ZARENA_VERSION_NUMBER)

// Version is the version of the library actually loaded, as "MAJOR.MINOR.PATCH" and as
// a number comparable with HeaderVersion.
func Version() (string, uint32) {
	return C.GoString(C.zarena_version_string()), uint32(C.zarena_version_number())
}
