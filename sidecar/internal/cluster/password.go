package cluster

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
)

// derivedSaltPrefix marks the passwords whose SCRAM verifier has a salt derived from the password
// (saltFor): the only ones whose SCRAM keys dataenv can compute again (ScramKeys). Passwords made
// before it (64 hex characters) have a random salt, which dataenv did not keep.
const derivedSaltPrefix = "v2"

// newPassword returns a random password for a managed role: derivedSaltPrefix and 64 hex
// characters (256 random bits; plain ASCII, so SASLprep leaves it unchanged).
func newPassword() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return derivedSaltPrefix + hex.EncodeToString(b)
}

const scramIterations = 4096

// saltFor is the salt of password's verifier: derived from the password for a password of
// newPassword's, random otherwise. A salt keeps equal passwords from having equal verifiers; a
// password of 256 random bits is never equal to another, so deriving its salt from it takes
// nothing away, and lets ScramKeys compute the verifier's keys again from the password alone.
func saltFor(password string) ([]byte, error) {
	if strings.HasPrefix(password, derivedSaltPrefix) {
		return hmacSHA256([]byte(password), "dataenv SCRAM salt")[:16], nil
	}
	salt := make([]byte, 16)
	_, err := rand.Read(salt)
	return salt, err
}

// scramKeys are the ClientKey and ServerKey of a SCRAM-SHA-256 verifier.
type scramKeys struct{ client, server []byte }

func deriveScramKeys(password string, salt []byte) (scramKeys, error) {
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return scramKeys{}, fmt.Errorf("derive the password verifier: %w", err)
	}
	return scramKeys{client: hmacSHA256(salted, "Client Key"), server: hmacSHA256(salted, "Server Key")}, nil
}

// scramVerifier computes the SCRAM-SHA-256 verifier PostgreSQL stores for password, so that
// CREATE/ALTER ROLE ... PASSWORD sends the verifier and the plain password never reaches the
// server (nor its statement log).
func scramVerifier(password string) (string, error) {
	salt, err := saltFor(password)
	if err != nil {
		return "", err
	}
	k, err := deriveScramKeys(password, salt)
	if err != nil {
		return "", err
	}
	storedKey := sha256.Sum256(k.client)
	enc := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, enc(salt), enc(storedKey[:]), enc(k.server)), nil
}

// keysCache holds the SCRAM keys of the passwords ScramKeys was asked for: deriving them is the
// 4,096 rounds a client otherwise spends at every connection, and a password's keys never change.
var keysCache = struct {
	sync.Mutex
	m map[string]scramKeys
}{m: map[string]scramKeys{}}

// keysCacheMax bounds keysCache (one entry per workspace role a sidecar serves; emptied when full).
const keysCacheMax = 4096

// ScramKeys returns the base64 ClientKey and ServerKey of password's verifier, for a libpq client
// (PostgreSQL 18's scram_client_key and scram_server_key) that then authenticates without
// deriving them: ok is false for a password whose verifier's salt dataenv cannot know (one made
// before derivedSaltPrefix). The keys let their holder log in as the role, as the password does.
func ScramKeys(password string) (client, server string, ok bool) {
	if !strings.HasPrefix(password, derivedSaltPrefix) {
		return "", "", false
	}
	keysCache.Lock()
	k, hit := keysCache.m[password]
	keysCache.Unlock()
	if !hit {
		salt, _ := saltFor(password)
		var err error
		if k, err = deriveScramKeys(password, salt); err != nil {
			return "", "", false
		}
		keysCache.Lock()
		if len(keysCache.m) >= keysCacheMax {
			clear(keysCache.m)
		}
		keysCache.m[password] = k
		keysCache.Unlock()
	}
	enc := base64.StdEncoding.EncodeToString
	return enc(k.client), enc(k.server), true
}

func hmacSHA256(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}
