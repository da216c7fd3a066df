package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/trawl-dev/trawl/web/deploy"
)

// listTools prints the deployment's tools: a table, or with --json the
// array GET /v1/tools answers.
func listTools(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("tools", stderr)
	cfgPath := configFlag(fs)
	asJSON := fs.Bool("json", false, "print one JSON array, each tool as GET /v1/tools shows it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("tools: unexpected argument %q", fs.Arg(0))
	}
	srv, done, err := openParts(ctx, *cfgPath, stderr, deploy.PartsCall)
	if err != nil {
		return err
	}
	defer done()
	views := srv.ToolViews()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(views)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tKIND\tEFFECT\tMETHOD\tPATH\tPAGINATION\tITEMS")
	paginated, writes := 0, 0
	for _, v := range views {
		items := "-"
		if v.Pagination.ItemsFound {
			items = v.Pagination.Items
			if items == "" {
				items = "(bare array)"
			}
		}
		if v.Pagination.Paginated() {
			paginated++
		}
		if v.Effect.Writes() {
			writes++
		}
		method, path := v.Method, v.Path
		if method == "" {
			method, path = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Kind, v.Effect, method, path, v.Pagination.Strategy, items)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%d tools, %d with detected pagination, %d that change data\n", len(views), paginated, writes)
	return err
}
