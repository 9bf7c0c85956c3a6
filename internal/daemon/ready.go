package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// readyAddrs is what --ready-file holds: the addresses actually bound,
// which differ from the settings when a port is 0.
type readyAddrs struct {
	GRPC       string `json:"grpc"`
	HTTP       string `json:"http"`
	Debug      string `json:"debug"`
	Prometheus string `json:"prometheus,omitempty"`
}

// writeReady writes the bound addresses to the ready file, if one is set.
// A caller that starts ratelimitd on port 0 waits for the file instead of
// choosing a free port itself, which another process can take first. The
// file appears whole (written aside, then renamed) and only once every
// listener is open.
func (a *app) writeReady() error {
	if a.set.ReadyFile == "" {
		return nil
	}
	addrs := readyAddrs{GRPC: a.grpcLn.Addr().String(), HTTP: a.httpLn.Addr().String(), Debug: a.debugLn.Addr().String()}
	if a.promLn != nil {
		addrs.Prometheus = a.promLn.Addr().String()
	}
	body, err := json.Marshal(addrs)
	if err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(a.set.ReadyFile), ".ready-*")
	if err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	_, err = tmp.Write(append(body, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), a.set.ReadyFile)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}
