package deploy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// Sealer seals small secrets with AES-GCM under one key: what it seals
// is a fresh random nonce followed by the ciphertext, bound to a label
// (the additional data: opening under another label fails). The stored
// connections (the deployment's key, the label naming the user and the
// toolkit) and the sessions' runtime credentials (a key derived from the
// session's token, no label) are sealed by it. Safe for concurrent use.
type Sealer struct{ aead cipher.AEAD }

// ErrSealedShort is Open's error for input shorter than a nonce.
var ErrSealedShort = errors.New("sealed value is too short")

// NewSealer returns a Sealer for key: 16, 24 or 32 bytes (AES-128, -192
// or -256).
func NewSealer(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealing key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal returns plain sealed under label.
func (s *Sealer) Seal(plain, label []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	out := make([]byte, n, n+len(plain)+s.aead.Overhead())
	if _, err := rand.Read(out); err != nil {
		return nil, err
	}
	return s.aead.Seal(out, out, plain, label), nil
}

// Open returns what Seal sealed under label; an error when sealed is
// damaged, was sealed under another key or label, or is too short
// (ErrSealedShort).
func (s *Sealer) Open(sealed, label []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrSealedShort
	}
	return s.aead.Open(nil, sealed[:n], sealed[n:], label)
}
