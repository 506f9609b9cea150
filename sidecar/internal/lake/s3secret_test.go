package lake

import (
	"strings"
	"testing"

	"github.com/dataenv/dataenv/sidecar/internal/control"
	"github.com/dataenv/dataenv/sidecar/internal/objectstore"
)

// With read-only keys the storage-wide secret holds them, and the read-write keys are scoped to
// each written prefix of that storage only; without them one secret holds the only keys.
func TestS3SecretsScopeTheReadWriteKeysToWrittenPrefixes(t *testing.T) {
	s := control.Storage{Name: "st", URL: "s3://bkt", Creds: objectstore.Credentials{
		AccessKeyID: "RWKEY", SecretAccessKey: "rwsecret", ReadOnlyAccessKeyID: "ROKEY", ReadOnlySecretAccessKey: "rosecret"}}
	writes := []string{"s3://bkt/__dataenv_forks/a/main/", "s3://other/x/"}
	got := s3Secrets(s, writes)
	if len(got) != 2 {
		t.Fatalf("secrets %q, want the storage's and one scoped to its written prefix", got)
	}
	if !strings.Contains(got[0], "KEY_ID 'ROKEY'") || !strings.Contains(got[0], "SCOPE 's3://bkt/'") || strings.Contains(got[0], "RWKEY") {
		t.Errorf("storage-wide secret %s", got[0])
	}
	if !strings.Contains(got[1], "KEY_ID 'RWKEY'") || !strings.Contains(got[1], "SCOPE 's3://bkt/__dataenv_forks/a/main/'") {
		t.Errorf("write secret %s", got[1])
	}
	s.Creds.ReadOnlyAccessKeyID, s.Creds.ReadOnlySecretAccessKey = "", ""
	if got := s3Secrets(s, writes); len(got) != 1 || !strings.Contains(got[0], "KEY_ID 'RWKEY'") {
		t.Errorf("without read-only keys: %q", got)
	}
}
