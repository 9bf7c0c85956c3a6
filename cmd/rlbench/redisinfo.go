package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// redisConn is a minimal RESP client for INFO: the bench must not share
// the code it measures.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRedis(addr string) (*redisConn, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	return &redisConn{c: c, r: bufio.NewReader(c)}, nil
}

func (r *redisConn) close() { r.c.Close() }

// do sends an inline command and returns a simple or bulk string reply.
func (r *redisConn) do(cmd string) (string, error) {
	_ = r.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := r.c.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	line, err := r.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "+"):
		return line[1:], nil
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("redis: %s", line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis: bad bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("redis: unexpected reply %q", line)
	}
}

// cmdStat is one INFO commandstats line.
type cmdStat struct {
	calls int64
	usec  int64
}

// commandStats parses INFO commandstats into command name -> totals.
func commandStats(r *redisConn) (map[string]cmdStat, error) {
	info, err := r.do("INFO commandstats")
	if err != nil {
		return nil, err
	}
	stats := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		line = strings.TrimSpace(line)
		name, rest, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for kv := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				s.calls = n
			case "usec":
				s.usec = n
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return stats, nil
}

// scriptCommands are the commands a decision runs its script with.
var scriptCommands = []string{"evalsha", "eval", "fcall", "fcall_ro", "evalsha_ro", "eval_ro"}

// statDelta summarises what Redis did between two snapshots: every command
// but INFO (the bench's own), and the script commands on their own.
func statDelta(before, after map[string]cmdStat) (commands int64, script cmdStat) {
	for name, a := range after {
		if name == "info" {
			continue
		}
		d := a.calls - before[name].calls
		commands += d
		for _, s := range scriptCommands {
			if name == s {
				script.calls += d
				script.usec += a.usec - before[name].usec
			}
		}
	}
	return commands, script
}
