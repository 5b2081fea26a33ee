package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"strings"
)

// TokenPrefix starts every API token, so secret scanners can find leaked
// ones.
const TokenPrefix = "rath_"

// tokenBody is the number of base62 characters after the prefix: 43 of
// them hold 256 random bits.
const tokenBody = 43

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewToken returns a fresh random token and its hash.
func NewToken() (token, hash string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", err
	}
	n := new(big.Int).SetBytes(b[:])
	body := make([]byte, tokenBody)
	q, r := new(big.Int), new(big.Int)
	base := big.NewInt(62)
	for i := tokenBody - 1; i >= 0; i-- {
		q.QuoRem(n, base, r)
		body[i] = base62[r.Int64()]
		n, q = q, n
	}
	token = TokenPrefix + string(body)
	return token, HashToken(token), nil
}

// HashToken returns the hex SHA-256 of a token: what the database stores.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// LooksLikeToken reports whether s has a token's shape (prefix, length,
// alphabet). It is a cheap filter before a database lookup, not a check.
func LooksLikeToken(s string) bool {
	body, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(body) != tokenBody {
		return false
	}
	for i := range len(body) {
		if strings.IndexByte(base62, body[i]) < 0 {
			return false
		}
	}
	return true
}

// newID returns a token's public id: "tok_" and 16 hex digits.
func newID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "tok_" + hex.EncodeToString(b[:]), nil
}
