package zarena

// The one C-callable entry point into Go: the library's log callback. It is alone in
// its file because cgo forbids C definitions next to //export.

/*
#include <zarena/zarena.h>
*/
import "C"

import "runtime/cgo"

//export zarenaGoLog
func zarenaGoLog(userData C.uintptr_t, rec *C.zarena_log_record) {
	defer func() {
		// Nothing may unwind into C: a bad handle or a broken record costs the record.
		if p := recover(); p != nil {
			sink.panics.Add(1)
		}
	}()
	s := cgo.Handle(userData).Value().(*logSink)
	s.deliver(func() Record { return recordFromC(rec) })
}
