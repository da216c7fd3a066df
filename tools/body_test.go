package tools

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestBodyReaderCutsAndScrubsAcrossChunks(t *testing.T) {
	r := newBodyReader(3*chunkSize, 3*chunkSize)
	secret := "secret-across-chunks"
	body := strings.Repeat("a", chunkSize-7) + secret + strings.Repeat("b", 3*chunkSize)
	s := NewScrubber(secret)
	// Unknown length: chunks, cut at the cap.
	got, cut, err := r.read(context.Background(), strings.NewReader(body), -1, s)
	if err != nil || !cut || len(got) != 3*chunkSize-len(secret)+len(Mask) {
		t.Fatalf("read = %d bytes, cut %v, %v", len(got), cut, err)
	}
	if bytes.Contains(got, []byte(secret)) || !bytes.Contains(got, []byte("a"+Mask+"b")) {
		t.Error("the secret across a chunk boundary was not masked")
	}
	// Known length within the cap: read whole, not cut.
	small := "x" + secret + "y"
	got, cut, err = r.read(context.Background(), strings.NewReader(small), int64(len(small)), s)
	if err != nil || cut || string(got) != "x"+Mask+"y" {
		t.Errorf("known length: %q %v %v", got, cut, err)
	}
	// A body shorter than announced is an error, not a silent short page.
	if _, _, err := r.read(context.Background(), strings.NewReader("abc"), 10, s); err == nil {
		t.Error("a body shorter than its Content-Length was accepted")
	}
	r.mu.Lock()
	free := len(r.free)
	r.mu.Unlock()
	if free > maxFreeChunks {
		t.Errorf("free list holds %d chunks, bound %d", free, maxFreeChunks)
	}
}

func TestBodyReaderCapWaitsThenFailsClearly(t *testing.T) {
	const max = 1 << 10
	r := newBodyReader(max, max+1) // room for one body of unknown length
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := r.read(context.Background(), pr, -1, nil)
		done <- err
	}()
	pw.Write([]byte("held")) // the first read now holds the cap
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, _, err := r.read(ctx, strings.NewReader("second"), -1, nil)
	if !errors.Is(err, ErrBodyBudget) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second read under a full cap: %v", err)
	}
	pw.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The first released its room: a waiting caller now gets it.
	got, _, err := r.read(context.Background(), strings.NewReader("third"), -1, nil)
	if err != nil || string(got) != "third" {
		t.Errorf("after release: %q %v", got, err)
	}
}
