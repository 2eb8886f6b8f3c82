module github.com/zarena/zarena/examples/go

go 1.23

require github.com/zarena/zarena/go v0.0.0

replace github.com/zarena/zarena/go => ../../go
