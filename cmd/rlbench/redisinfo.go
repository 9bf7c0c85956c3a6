package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimitd/ratelimitd/internal/redisinfo"
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

// commandStats reads INFO commandstats: command name -> totals.
func commandStats(r *redisConn) (map[string]redisinfo.CommandStat, error) {
	info, err := r.do("INFO commandstats")
	if err != nil {
		return nil, err
	}
	return redisinfo.CommandStats(info), nil
}

// statDelta summarises what Redis did between two snapshots: every command
// but INFO (the bench's own), and the script commands on their own.
func statDelta(before, after map[string]redisinfo.CommandStat) (commands int64, script redisinfo.CommandStat) {
	for name, a := range after {
		if name == "info" {
			continue
		}
		d := a.Calls - before[name].Calls
		commands += d
		if slices.Contains(redisinfo.ScriptCommands, name) {
			script.Calls += d
			script.Usec += a.Usec - before[name].Usec
		}
	}
	return commands, script
}

// printCommandStats shows where Redis's time went in one run, command by
// command, per answered decision: the breakdown behind the run's Redis CPU.
func printCommandStats(before, after map[string]redisinfo.CommandStat, decisions int) {
	names := make([]string, 0, len(after))
	for name := range after {
		if name != "info" && after[name].Calls > before[name].Calls {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	n := float64(max(1, decisions))
	for _, name := range names {
		calls := after[name].Calls - before[name].Calls
		usec := after[name].Usec - before[name].Usec
		fmt.Printf("      %-12s %8.4f calls/dec %8.2f us/call %7.2f us/dec\n", name, float64(calls)/n, float64(usec)/float64(calls), float64(usec)/n)
	}
}
