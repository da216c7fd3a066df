package demo

import (
	"net/http/httptest"
	"testing"
)

func BenchmarkNewServer(b *testing.B) {
	acmeData()
	for b.Loop() {
		NewServer(Options{})
	}
}

func BenchmarkOrdersPage(b *testing.B) {
	s := NewServer(Options{})
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/orders?page=7&per_page=100", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

func BenchmarkMailSearch(b *testing.B) {
	s := NewServer(Options{})
	for b.Loop() {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest("GET", "/mail/messages?q=has:attachment+-is:unread+after:2025/03/01&maxResults=50", nil))
		if rec.Code != 200 {
			b.Fatal(rec.Code)
		}
	}
}

func BenchmarkNewMailState(b *testing.B) {
	for b.Loop() {
		newMailState(nil)
	}
}
