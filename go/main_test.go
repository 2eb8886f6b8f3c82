package zarena

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	switch os.Getenv("ZARENA_TEST_HELPER_MODE") {
	case "go-log-fatal":
		logFatalChild()
	}
	// Every test creates arenas; their info records on stderr would bury the output.
	if os.Getenv("ZARENA_LOG_LEVEL") == "" {
		os.Setenv("ZARENA_LOG_LEVEL", "warn")
	}
	if err := SetLogger(nil, LevelFromEnv()); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}
