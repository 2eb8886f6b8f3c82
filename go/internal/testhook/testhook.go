// Package testhook connects package zarena to package zarenatest, the helpers for tests,
// without making those helpers part of zarena's own API: zarena fills the variables at
// init, zarenatest calls them.
package testhook

import "time"

// InjectOverflowFault is (*zarena.Arena).injectOverflowFault; arena is a *zarena.Arena.
var InjectOverflowFault func(arena any, failNth, delayNth uint64, delay time.Duration) error
