// Command trawl is the trawl server and its command-line tools:
//
//	trawl [serve] [--config F] [--listen ADDR] [--data-dir DIR] [--demo-latency MS] [--cache MODE]
//	trawl tools [--config F] [--json | --wide]
//	trawl inspect SPEC [--json | --wide]
//	trawl call TOOL --args JSON [--config F]
//	trawl chat AGENT [--config F [--listen ADDR] | --url URL --key KEY] [--chat ID] [--message TEXT]
//	trawl mcp [--agent ID] [--config F] [--demo-latency MS]
//	trawl replay TRANSCRIPT [--agent ID] [--config F]
//	trawl eval DATASET [--config F] [--model replay|live] [--out DIR] [--baseline DIR] …
//	trawl version
//
// Without --config (and without ./trawl.yaml) trawl serves the built-in
// demo. Every command takes --help. Exit status: 0 on success, 1 on a
// failed call, 2 on bad usage, 3 when `trawl call` returned a partial
// result (or `trawl eval` regressed against its baseline only).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
)

// errUsage marks errors that exit with status 2.
var errUsage = errors.New("usage")

// errPartial marks a call whose result is partial: exit status 3.
var errPartial = errors.New("partial result")

type usageError struct{ msg string }

func (e usageError) Error() string   { return e.msg }
func (e usageError) Is(t error) bool { return t == errUsage }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// helpRequested is what parseFlags returns for -h or --help: run prints
// the command's usage on stdout and exits 0.
type helpRequested struct{ fs *flag.FlagSet }

// silentExit ends a command with its status and no message: Ctrl-C at a
// prompt (130), as shells report an interrupted program.
type silentExit int

func (e silentExit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func (helpRequested) Error() string { return "help requested" }

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
	var silent silentExit
	if errors.As(err, &silent) {
		return int(silent)
	}
	fmt.Fprintln(stderr, "trawl: "+oneLine(err.Error()))
	if coded, ok := errors.AsType[interface {
		error
		ExitStatus() int
	}](err); ok {
		return coded.ExitStatus() // trawl eval: 1 or 3
	}
	switch {
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errPartial):
		return 3
	}
	return 1
}

func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}

// command is one subcommand as its help describes it.
type command struct {
	name     string
	synopsis string
	about    string
	run      func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// commands in the order the help lists them. run is filled in init (it
// refers to commands for `trawl help CMD`).
var commands = []*command{
	{name: "serve", synopsis: "trawl [serve] [--config F] [--listen ADDR] [--data-dir DIR] [--demo-latency MS] [--cache MODE]",
		about: "Serve the API, the chat streams and the Studio console (/studio/) until interrupted.\n" +
			"Without --config and without ./trawl.yaml, serve the built-in demo."},
	{name: "tools", synopsis: "trawl tools [--config F] [--json | --wide]",
		about: "List the deployment's tools with their kind and the pagination detected for each."},
	{name: "inspect", synopsis: "trawl inspect SPEC [--json | --wide]",
		about: "Show the tools an OpenAPI document yields and the pagination detected for each."},
	{name: "call", synopsis: "trawl call TOOL --args JSON [--agent ID] [--config F]",
		about: "Run one tool call through the looping engine, no model: the envelope as JSON on stdout,\n" +
			"progress on stderr (a live line on a terminal) and the boundary statement at the end.\n" +
			"--agent applies that agent's binding and approval policy: a call that needs approval shows\n" +
			"its evidence and asks on the terminal, and runs only on yes.\n" +
			"Exit status 3 when the result is partial (a bound or an error ended the walk early)."},
	{name: "chat", synopsis: "trawl chat AGENT [--config F [--listen ADDR] | --url URL --key KEY] [--chat ID] [--message TEXT]",
		about: "Chat with an agent in the terminal over trawl's stream: text as it streams, a live progress\n" +
			"line per looping tool call and its verdict. A dropped connection resumes where it broke.\n" +
			"Without --url it starts the deployment (--config, ./trawl.yaml or the demo) in-process.\n" +
			"Reads one message per line from stdin until end of input, or sends --message alone."},
	{name: "mcp", synopsis: "trawl mcp [--agent ID] [--config F] [--demo-latency MS]",
		about: "Serve an agent's tools to an MCP client over stdio (Claude Desktop, Claude Code, VS Code…): walks,\n" +
			"verdicts, stored results and tool search, as in chat. Without --config and without ./trawl.yaml,\n" +
			"the built-in demo's agent. Runs as the config's organization and keeps nothing after it exits."},
	{name: "replay", synopsis: "trawl replay TRANSCRIPT [--agent ID] [--config F]",
		about: "Play a recorded conversation against the live tools as an experiment run (no cache reads):\n" +
			"an account on stderr, the resulting thread (UIMessage[]) as JSON on stdout."},
	{name: "eval", synopsis: "trawl eval DATASET [--config F] [--agent ID] [--model replay|live] [--concurrency N] [--repeat N] [--upstream live|record|replay] [--out DIR] [--baseline DIR] [--allow-writes]",
		about: "Run a dataset of conversations (JSONL, one case a line) as experiment runs (no cache reads, writes refused)\n" +
			"and check each: its expectations, and always its honesty (unsupported_claim, verdict_changed).\n" +
			"Writes DIR/report.json and DIR/junit.xml and prints a table; --baseline compares with an earlier run.\n" +
			"Exit status 0 when every check holds, 1 when any fails, 3 when only the comparison regressed.\n" +
			"trawl eval export --agent ID (--chat ID… | --since D) --url URL --key KEY writes stored chats as cases."},
	{name: "version", synopsis: "trawl version",
		about: "Print trawl's version (also: trawl --version)."},
}

func init() {
	fns := map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error{
		"serve": func(ctx context.Context, a []string, _ io.Reader, o, e io.Writer) error { return serve(ctx, a, o, e) },
		"tools": func(ctx context.Context, a []string, _ io.Reader, o, e io.Writer) error {
			return listTools(ctx, a, o, e)
		},
		"inspect": func(ctx context.Context, a []string, _ io.Reader, o, _ io.Writer) error {
			return inspect(ctx, a, o)
		},
		"call":    call,
		"chat":    chat,
		"mcp":     mcpStdio,
		"replay":  func(ctx context.Context, a []string, _ io.Reader, o, e io.Writer) error { return replay(ctx, a, o, e) },
		"eval":    func(ctx context.Context, a []string, _ io.Reader, o, e io.Writer) error { return evalCmd(ctx, a, o, e) },
		"version": printVersion,
	}
	for _, c := range commands {
		c.run = fns[c.name]
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run dispatches a subcommand.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	name := "serve"
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-h" || a == "--help" || a == "-help" || a == "help":
			if a == "help" && len(args) > 1 {
				if c := lookup(args[1]); c != nil {
					return run(ctx, []string{c.name, "--help"}, stdin, stdout, stderr)
				}
				return usagef("help: unknown command %q (want %s)", args[1], commandNames())
			}
			_, err := io.WriteString(stdout, mainUsage())
			return err
		case a == "--version" || a == "-version":
			return printVersion(ctx, args[1:], stdin, stdout, stderr)
		case a != "" && a[0] != '-':
			name, args = a, args[1:]
		}
	}
	c := lookup(name)
	if c == nil {
		return usagef("unknown command %q (want %s; see trawl --help)", name, commandNames())
	}
	err := c.run(ctx, args, stdin, stdout, stderr)
	var help helpRequested
	if errors.As(err, &help) {
		_, err = io.WriteString(stdout, commandUsage(c, help.fs))
	}
	return err
}

func commandNames() string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("trawl — a streaming agent runtime that walks every page.\n\nusage:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n", c.synopsis)
	}
	b.WriteString(`
Without --config and without ./trawl.yaml, trawl serves its built-in demo.
"trawl COMMAND --help" (or "trawl help COMMAND") describes a command and its flags.

exit status: 0 success · 1 a failed call · 2 bad usage · 3 a partial result (trawl call)
`)
	return b.String()
}

// commandUsage is a command's help: its synopsis, what it does, and every
// flag with its description.
func commandUsage(c *command, fs *flag.FlagSet) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\n%s\n", c.synopsis, c.about)
	type row struct{ left, usage string }
	var rows []row
	width := len("-h, --help")
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if arg != "" {
			left += " " + strings.ToUpper(arg)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		width = max(width, len(left))
		rows = append(rows, row{left, usage})
	})
	rows = append(rows, row{"-h, --help", "print this help and exit"})
	b.WriteString("\nflags:\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r.left, r.usage)
	}
	return b.String()
}

// printVersion prints the version stamped into the binary: the module
// version of a `go install`, else the VCS revision of a build in a
// checkout, else "devel".
func printVersion(_ context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	fs := flagSet("version", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("version: unexpected argument %q", fs.Arg(0))
	}
	_, err := fmt.Fprintf(stdout, "trawl %s\n", version())
	return err
}

func version() string {
	v, rev, dirty := "devel", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev != "" && !strings.Contains(v, rev[:min(12, len(rev))]) {
		v += " " + rev[:min(12, len(rev))]
		if dirty {
			v += "+dirty"
		}
	}
	return v + " " + runtime.Version()
}
