// Package stream speaks the Vercel AI SDK's UI message stream protocol
// over server-sent events: the chunk types and their parser, the SSE
// writer, the per-run event log that lets clients follow and resume a
// run, the client that follows one ([Follow]), and the throttle for
// tool-call progress. It imports no other trawl package.
//
// Every chunk of a run goes through the run's [EventLog]; clients are
// served from the log, never from the producer:
//
//	log := stream.NewMemoryLog(stream.MemoryLogOptions{})
//	_ = log.Open(ctx, runID)
//	go func() {
//		defer log.Close(context.WithoutCancel(ctx), runID)
//		log.Append(ctx, runID, stream.Start{})
//		log.Append(ctx, runID, stream.TextStart{ID: "t1"})
//		log.Append(ctx, runID, stream.TextDelta{ID: "t1", Delta: "Hello"})
//		// …
//	}()
//	err := stream.Serve(w, r, log, runID, stream.ServeOptions{})
//
// On the wire each chunk is one event, "id: <seq>" then "data: <json>",
// and the stream ends with "data: [DONE]" as the AI SDK's own server
// helpers end it. A client that reconnects with Last-Event-ID gets exactly
// the events after that one. [Follow] is that client: it yields a run's
// chunks, resuming with Last-Event-ID whenever the connection drops:
//
//	for ch, err := range stream.Follow(ctx, url, stream.FollowOptions{}) {
//		if err != nil {
//			return err // stream.ErrNotRunning when no run is active
//		}
//		if d, ok := ch.(stream.TextDelta); ok {
//			fmt.Print(d.Delta)
//		}
//	}
//
// # Why the server side is ours and not r3labs/sse's
//
// r3labs/sse/v2 (v2.10.0) is the SSE client under [Follow] (its framing
// and reconnects are sound) and an independent client in the tests;
// serving with it would not meet this package's contract:
//
//   - Its EventLog numbers events from 0 and Replay sends those whose id
//     is >= Last-Event-ID, so a client that resumes receives again the
//     event it already had; and Last-Event-ID "0" cannot be told from no
//     header at all.
//   - Fan-out is pushed: the stream's single goroutine sends each event
//     into every subscriber's 64-slot channel with a blocking send, so one
//     stalled client stalls the stream for every client and, once the
//     1024-slot queue fills, the publisher too.
//   - Its log is unbounded, expires events only by wall-clock TTL, cannot
//     mark a run as ended (an event with empty data aborts the handler),
//     takes the stream name from a query parameter and lives only in one
//     process.
//
// Fixing that means replacing its log, its fan-out and its handler,
// leaving only the framing of an event (a few lines). So the log here is
// pull-based — readers read an append-only log at their own pace and are
// woken by a channel that Append closes — and [Serve] writes the frames.
//
// Speaking the protocol exactly is checked against the AI SDK itself:
// testdata/conformance holds a Node harness (check.mjs; install.sh installs
// it) that reads a stream with ai@5.0.60, the latest 6.x and the latest
// 7.x (schema, readUIMessageStream and a Chat over DefaultChatTransport);
// conformance_test.go runs it against a turn served by this package when
// the harness is installed.
package stream
