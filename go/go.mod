module github.com/zarena/zarena/go

// The version the package is built and tested with. The planned path's fast build
// (runtime_fast.go) is fenced to exactly this version on amd64; later versions build the
// portable one (runtime_portable.go) until verified.
go 1.23
