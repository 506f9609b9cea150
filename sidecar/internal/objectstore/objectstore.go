// Package objectstore lists and deletes objects under a prefix of a storage root: a local
// directory (file:///dir) or an S3-compatible bucket (s3://bucket[/prefix]) through minio-go.
//
// Keys are always relative to the storage root and use "/" separators. Deletes are guarded: a
// prefix is deleted only when it starts with the guard the caller names (for fork data,
// "__dataenv_forks/<segment>/"), ends with "/", and has no "." or ".." segment, so a bug upstream
// can never widen a delete to the parent's data or the whole root.
package objectstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Object is one stored object.
type Object struct {
	Key  string // relative to the storage root
	Size int64
}

// Store is a storage root.
type Store interface {
	// List returns the objects whose key starts with prefix, in key order.
	List(ctx context.Context, prefix string) ([]Object, error)
	// DeletePrefix deletes every object under prefix and returns how many it deleted. Refused
	// unless prefix passes CheckPrefix(prefix, guard).
	DeletePrefix(ctx context.Context, prefix, guard string) (int, error)
	// URL is the storage root's URL.
	URL() string
}

// Credentials reach an S3-compatible store. They are never printed: String hides them.
type Credentials struct {
	Endpoint        string `json:"endpoint,omitempty"` // host[:port] or http(s)://host[:port]
	Region          string `json:"region,omitempty"`
	AccessKeyID     string `json:"access_key_id,omitempty"`
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	SessionToken    string `json:"session_token,omitempty"`
	UseSSL          *bool  `json:"use_ssl,omitempty"`
	// ReadOnly* are optional keys that may only read the storage: jobs then use them for
	// everything but the prefixes they write (lake.s3Secrets).
	ReadOnlyAccessKeyID     string `json:"read_only_access_key_id,omitempty"`
	ReadOnlySecretAccessKey string `json:"read_only_secret_access_key,omitempty"`
	ReadOnlySessionToken    string `json:"read_only_session_token,omitempty"`
	URLStyle                string `json:"url_style,omitempty"` // path or vhost
}

// String describes the credentials without secrets.
func (c Credentials) String() string {
	return fmt.Sprintf("s3 credentials (endpoint %q, region %q, key set %t)", c.Endpoint, c.Region, c.AccessKeyID != "")
}

// GoString is String.
func (c Credentials) GoString() string { return c.String() }

// Secrets lists the secret values, for scrubbing error texts.
func (c Credentials) Secrets() []string {
	var out []string
	for _, s := range []string{c.SecretAccessKey, c.SessionToken, c.ReadOnlySecretAccessKey, c.ReadOnlySessionToken} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// HasReadOnlyKeys reports whether read-only keys are set.
func (c Credentials) HasReadOnlyKeys() bool { return c.ReadOnlyAccessKeyID != "" }

// HostPort is the endpoint without its scheme, and whether TLS is used (explicit use_ssl wins,
// then an http:// or https:// scheme, else TLS).
func (c Credentials) HostPort() (string, bool) {
	ep := strings.TrimSuffix(c.Endpoint, "/")
	ssl := true
	switch {
	case strings.HasPrefix(ep, "http://"):
		ep, ssl = strings.TrimPrefix(ep, "http://"), false
	case strings.HasPrefix(ep, "https://"):
		ep = strings.TrimPrefix(ep, "https://")
	}
	if c.UseSSL != nil {
		ssl = *c.UseSSL
	}
	return ep, ssl
}

// ErrGuard is returned when a delete is refused by its guard.
var ErrGuard = errors.New("refused by the delete guard")

// CheckPrefix refuses a prefix that is not under guard, does not end with "/", or has an empty,
// "." or ".." segment.
func CheckPrefix(prefix, guard string) error {
	if guard == "" || !strings.HasSuffix(guard, "/") {
		return fmt.Errorf("delete of %q: %w: the guard %q must be a non-empty prefix ending with /", prefix, ErrGuard, guard)
	}
	if !strings.HasPrefix(prefix, guard) || !strings.HasSuffix(prefix, "/") {
		return fmt.Errorf("delete of %q: %w: it must start with %q and end with /", prefix, ErrGuard, guard)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(prefix, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("delete of %q: %w: empty, . or .. segment", prefix, ErrGuard)
		}
	}
	return nil
}

// Open returns the store of url: file:///absolute/dir or s3://bucket[/prefix].
func Open(url string, creds Credentials) (Store, error) {
	switch {
	case strings.HasPrefix(url, "file:///"):
		return newFileStore(url)
	case strings.HasPrefix(url, "s3://"):
		return newS3Store(url, creds)
	default:
		return nil, fmt.Errorf("storage url %q: want file:///dir or s3://bucket", url)
	}
}

// Count returns the number of objects and bytes under prefix.
func Count(ctx context.Context, s Store, prefix string) (objects int, bytes int64, err error) {
	list, err := s.List(ctx, prefix)
	if err != nil {
		return 0, 0, err
	}
	for _, o := range list {
		bytes += o.Size
	}
	return len(list), bytes, nil
}
