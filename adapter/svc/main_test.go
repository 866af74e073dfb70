package svc

import (
	"os"
	"testing"

	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	pollerLogger = zap.NewNop // tests observe pollers they start themselves
	os.Exit(m.Run())
}
