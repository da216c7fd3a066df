// Command trawl is the trawl server and its command-line tools:
//
//	trawl [serve] [--config F] [--listen ADDR] [--data-dir DIR]
//	trawl inspect SPEC [--json]
//	trawl call TOOL --args JSON [--config F]
//	trawl replay TRANSCRIPT [--agent ID] [--config F]
//
// Without --config (and without ./trawl.yaml) trawl serves the built-in
// demo. Exit status: 0 on success, 1 on a failed call, 2 on bad usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// errUsage marks errors that exit with status 2.
var errUsage = errors.New("usage")

type usageError struct{ msg string }

func (e usageError) Error() string   { return e.msg }
func (e usageError) Is(t error) bool { return t == errUsage }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "trawl: "+oneLine(err.Error()))
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' || r == '\r' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// run dispatches a subcommand.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, stdout, stderr)
	case "inspect":
		return inspect(ctx, args, stdout)
	case "call":
		return call(ctx, args, stdout, stderr)
	case "replay":
		return replay(ctx, args, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usageText)
		return nil
	}
	return usagef("unknown command %q (want serve, inspect, call or replay)", cmd)
}

const usageText = `trawl — a streaming agent runtime that walks every page.

usage:
  trawl [serve] [--config F] [--listen ADDR] [--data-dir DIR]
  trawl inspect SPEC [--json]
  trawl call TOOL --args JSON [--config F]
  trawl replay TRANSCRIPT [--agent ID] [--config F]

Without --config and without ./trawl.yaml, trawl serves its built-in demo.
`
