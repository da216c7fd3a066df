// Package deploy assembles a trawl deployment from its config, apart from
// any HTTP: config decoding and defaults (trawl.yaml, ${ENV}), the stores,
// embedded or on Redis (stores.go is the one place that picks), the tool
// catalog and invoker, the looping engine, the model, the agents and the
// runner, workflows and connections, telemetry, the built-in demo, and
// the run host that keeps one run per chat or workflow run across
// replicas. It imports neither package web nor Echo, so every surface —
// the HTTP server, the CLI's call, tools and replay, an MCP server —
// opens a deployment the same way:
//
//	cfg, err := deploy.LoadConfig("trawl.yaml") // or deploy.DemoConfig()
//	d, err := deploy.Open(ctx, cfg, deploy.Options{Parts: deploy.PartsCall})
//	defer d.Close()
//	out, err := d.CallTool(ctx, "acme.list_orders", args, nil)
package deploy
