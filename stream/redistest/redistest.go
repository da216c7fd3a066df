// Package redistest starts a real redis-server for tests: its own process
// on a free loopback port, persistence off, stopped when the test ends —
// or a real Redis Cluster of three masters (StartCluster).
// Every Redis backend's tests use it (it lives under stream because stream
// imports no project package, so any package may import it).
package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string
	bin  string
	port int
	args []string // more arguments (a cluster node's)

	mu  sync.Mutex
	cmd *exec.Cmd
}

// Start starts a redis-server for t and stops it at t's end. It skips t,
// saying why, when no redis-server binary can be found.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with more redis-server arguments (a directive and
// its values, as "--rename-command", "EVAL", "eval_off").
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redistest: redis-server is not installed (Debian package redis-server; .ci/run installs it)")
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), bin: bin, port: port, args: args}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

// Cluster is a Redis Cluster of three masters (no replicas), each its
// own redis-server process, every slot assigned.
type Cluster struct {
	Addrs []string
	Nodes []*Server
}

// StartCluster starts a three-master Redis Cluster for t
// (redis-server --cluster-enabled yes on three ports, then
// redis-cli --cluster create) and stops it at t's end. It skips t, saying
// why, when redis-server or redis-cli cannot be found.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redistest: redis-server is not installed (Debian package redis-server; .ci/run installs it)")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redistest: redis-cli is not installed (Debian package redis-tools; .ci/run installs it)")
	}
	dir := t.TempDir()
	cl := &Cluster{}
	t.Cleanup(func() {
		for _, n := range cl.Nodes {
			n.Stop()
		}
	})
	for i := range 3 {
		var lastErr error
		for range 20 {
			// A node listens on its port and on port + 10000 (the
			// cluster bus): both must be free.
			port, err := freePort()
			if err != nil {
				t.Fatalf("redistest: %v", err)
			}
			if port+10000 > 65535 || !portFree(port+10000) {
				lastErr = fmt.Errorf("cluster bus port %d is taken", port+10000)
				continue
			}
			s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), bin: bin, port: port, args: []string{
				"--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
				"--cluster-config-file", fmt.Sprintf("%s/nodes-%d-%d.conf", dir, i, port), "--dir", dir,
			}}
			if lastErr = s.start(); lastErr == nil {
				cl.Nodes = append(cl.Nodes, s)
				cl.Addrs = append(cl.Addrs, s.Addr)
				break
			}
		}
		if lastErr != nil {
			t.Fatalf("redistest: starting a cluster node: %v", lastErr)
		}
	}
	args := append([]string{"--cluster", "create"}, cl.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must know every slot's master before a client starts.
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range cl.Addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("redistest: the cluster did not become ready: %v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return cl
}

// Client returns a cluster client of the cluster, closed at t's end.
func (cl *Cluster) Client(t testing.TB) *redis.ClusterClient {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { c.Close() })
	return c
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) start() error {
	args := append([]string{"--save", "", "--appendonly", "no", "--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1", "--daemonize", "no", "--loglevel", "warning"}, s.args...)
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server exited at start: %v", err)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.mu.Lock()
			s.cmd = cmd
			s.mu.Unlock()
			go func() { <-exited }()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return fmt.Errorf("redis-server did not answer on %s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Client returns a client of the server, closed at t's end.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.Addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// Stop kills the server (its data is gone: persistence is off).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		s.cmd = nil
		// Wait until the port is free again.
		for range 100 {
			conn, err := net.DialTimeout("tcp", s.Addr, 50*time.Millisecond)
			if err != nil {
				return
			}
			conn.Close()
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// Restart starts a stopped server again on the same port, empty.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	var err error
	for range 20 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redistest: restarting redis-server: %v", err)
}

// Backend is a Redis a test runs against: one server or a cluster.
type Backend interface {
	// Universal returns a client of it, closed at t's end (a
	// *redis.ClusterClient for a cluster: the stores tag their keys
	// for it, see tools/rediskey).
	Universal(t testing.TB) redis.UniversalClient
}

// Universal returns a client of the server, closed at t's end.
func (s *Server) Universal(t testing.TB) redis.UniversalClient { return s.Client(t) }

// Universal returns a cluster client of the cluster, closed at t's end.
func (cl *Cluster) Universal(t testing.TB) redis.UniversalClient { return cl.Client(t) }

// Each runs f twice, as the subtests "single" (one redis-server) and
// "cluster" (a three-master Redis Cluster): every Redis backend's
// conformance suite runs on both.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Run("single", func(t *testing.T) { f(t, Start(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, StartCluster(t)) })
}
