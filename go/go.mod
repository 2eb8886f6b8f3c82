module github.com/zarena/zarena/go

go 1.21
