package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ConfigVariable is the environment variable through which `cell serve` (the Node shim that
// validated the environment and made the private folder) hands the front its settings.
const ConfigVariable = "CELL_FRONT_CONFIG"

// Config is everything the front needs, resolved by the shim: the front itself reads no other
// setting, so the rules for each value (names, defaults, bounds) live once, in TypeScript.
type Config struct {
	Application      string `json:"application"`
	Node             string `json:"node"`
	Host             string `json:"host"`
	Port             int    `json:"port"`
	VersionLine      string `json:"versionLine"`
	HealthPath       string `json:"healthPath"`
	SupervisorHeader string `json:"supervisorHeader"`
	OTel             bool   `json:"otel"`
	// StateDir is the process's private folder: instances, their sockets and the blob cache.
	StateDir       string `json:"stateDir"`
	PollMs         int64  `json:"pollMs"`
	LeaseTTLMs     int64  `json:"leaseTtlMs"`
	DrainMs        int64  `json:"drainMs"`
	StopDrainMs    int64  `json:"stopDrainMs"`
	StartTimeoutMs int64  `json:"startTimeoutMs"`
	RetryMs        int64  `json:"retryMs"`
	MaxRetryMs     int64  `json:"maxRetryMs"`
	// UnsupervisedExitMs is how long to serve on without a supervisor's probe once the process
	// that started this one is gone; nil means never.
	UnsupervisedExitMs *int64 `json:"unsupervisedExitMs"`
	// HostSocket is the node's runtime host socket; empty: start PrivateHost.
	HostSocket string `json:"hostSocket"`
	// PrivateHost is the command line of a private `cell host --stdio`.
	PrivateHost []string `json:"privateHost"`
	// HostContext goes to the host in the hello as it is (what the host must know of this
	// process's environment); the front does not read it.
	HostContext json.RawMessage `json:"hostContext"`
	// GeoIPDB is the MaxMind DB request.cf is filled from (geoip.go); empty: none.
	GeoIPDB string `json:"geoipDb"`
}

// ParseConfig reads and checks the shim's settings.
func ParseConfig(raw string) (*Config, error) {
	if raw == "" {
		return nil, errors.New(ConfigVariable + " is not set: start the runtime with `cell serve`, not cell-front")
	}
	var c Config
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("%s cannot be read: %v", ConfigVariable, err)
	}
	switch {
	case c.Application == "" || c.Node == "" || c.Host == "":
		return nil, errors.New(ConfigVariable + " lacks the application, node or host")
	case c.Port <= 0 || c.Port > 65535:
		return nil, fmt.Errorf("%s has port %d", ConfigVariable, c.Port)
	case c.StateDir == "" || c.HealthPath == "" || (c.HostSocket == "" && len(c.PrivateHost) == 0):
		return nil, errors.New(ConfigVariable + " lacks the state folder, health path or runtime host")
	case c.PollMs <= 0 || c.LeaseTTLMs <= 0 || c.StartTimeoutMs <= 0 || c.RetryMs <= 0 || c.MaxRetryMs <= 0:
		return nil, errors.New(ConfigVariable + " has a timing that is not positive")
	}
	return &c, nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
