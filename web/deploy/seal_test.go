package deploy

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"testing"
)

func TestSealer(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	s, err := NewSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	label := []byte("u=ann;t=github")
	for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("secret "), 1000)} {
		sealed, err := s.Seal(plain, label)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Open(sealed, label)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("round trip of %d bytes: %q, %v", len(plain), got, err)
		}
		again, _ := s.Seal(plain, label)
		if bytes.Equal(sealed, again) {
			t.Error("two seals of the same value are equal: the nonce is not fresh")
		}
	}

	sealed, _ := s.Seal([]byte("token"), label)
	if _, err := s.Open(sealed, []byte("u=bob;t=github")); err == nil {
		t.Error("opened under another label")
	}
	other, _ := NewSealer(bytes.Repeat([]byte{8}, 32))
	if _, err := other.Open(sealed, label); err == nil {
		t.Error("opened under another key")
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := s.Open(tampered, label); err == nil {
		t.Error("opened a tampered value")
	}
	if _, err := s.Open(sealed[:5], label); !errors.Is(err, ErrSealedShort) {
		t.Errorf("short input: %v, want ErrSealedShort", err)
	}
	if _, err := NewSealer([]byte("short")); err == nil {
		t.Error("a 5-byte key was accepted")
	}

	// What the stores already hold (nonce, then the GCM ciphertext) opens.
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	nonce := bytes.Repeat([]byte{1}, aead.NonceSize())
	stored := aead.Seal(bytes.Clone(nonce), nonce, []byte("kept"), label)
	if got, err := s.Open(stored, label); err != nil || string(got) != "kept" {
		t.Errorf("stored value: %q, %v", got, err)
	}
}
