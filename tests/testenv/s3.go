package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/dataenv/dataenv/sidecar/localpg"
	"github.com/dataenv/dataenv/sidecar/procguard"
)

// S3 is a running S3-compatible server (versitygw, posix backend over a temporary directory) on
// a loopback port, with root credentials generated at start.
type S3 struct {
	Endpoint  string // host:port
	URL       string // http://host:port
	AccessKey string
	SecretKey string
	Region    string
	// Dir is the posix root: each bucket is a directory in it.
	Dir string
	// AdminURL is the gateway's admin API (users are made there: ReadOnlyUser).
	AdminURL string

	bin    string
	iamDir string

	cmd    *exec.Cmd
	exited chan struct{}
	guard  *procguard.Guard
	log    *LogBuffer

	stopOnce sync.Once
	stopErr  error
}

// VersitygwPath finds the versitygw binary: $DATAENV_VERSITYGW, PATH, $GOBIN, $(go env
// GOPATH)/bin. tests/setup/deps.sh installs it with go install.
func VersitygwPath() (string, error) {
	if p := os.Getenv("DATAENV_VERSITYGW"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	var cands []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		cands = append(cands, filepath.Join(gobin, "versitygw"))
	}
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 2 && lines[0] != "" {
			cands = append(cands, filepath.Join(lines[0], "versitygw"))
		}
		for _, gp := range filepath.SplitList(lines[len(lines)-1]) {
			cands = append(cands, filepath.Join(gp, "bin", "versitygw"))
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		cands = append(cands, filepath.Join(home, "go", "bin", "versitygw"))
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", errors.New("testenv: versitygw not found (PATH, $GOBIN, $GOPATH/bin); install it " +
		"with tests/setup/deps.sh (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0) " +
		"or set DATAENV_VERSITYGW")
}

// StartS3 starts versitygw and registers it to be stopped (and its directory removed) by Main.
func StartS3(ctx context.Context) (*S3, error) {
	bin, err := VersitygwPath()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "dataenv-s3-")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	guard, err := procguard.Start(0, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	iamDir, err := os.MkdirTemp("", "dataenv-s3-iam-")
	if err != nil {
		_ = guard.Fire()
		return nil, fmt.Errorf("testenv: %w", err)
	}
	s := &S3{AccessKey: "AK" + strings.ToUpper(randomHex(9)), SecretKey: randomHex(20),
		Region: "us-east-1", Dir: dir, bin: bin, iamDir: iamDir}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		if lastErr = s.spawn(ctx, bin); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		_ = guard.Fire()
		return nil, fmt.Errorf("testenv: start versitygw: %w", lastErr)
	}
	if s.guard, err = procguard.Start(s.cmd.Process.Pid, dir); err != nil {
		s.kill()
		_ = guard.Fire()
		return nil, err
	}
	_ = guard.Disarm()
	RegisterCleanup("s3 "+s.Endpoint, s.Stop)
	return s, nil
}

// spawn starts versitygw on a free port and waits until it answers HTTP.
func (s *S3) spawn(ctx context.Context, bin string) error {
	port, err := localpg.FreePort()
	if err != nil {
		return err
	}
	adminPort, err := localpg.FreePort()
	if err != nil {
		return err
	}
	s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s.URL = "http://" + s.Endpoint
	admin := net.JoinHostPort("127.0.0.1", strconv.Itoa(adminPort))
	s.AdminURL = "http://" + admin
	// The internal IAM service (a directory of its own) lets tests make users with less access
	// than the root's (ReadOnlyUser).
	cmd := exec.Command(bin, "--port", s.Endpoint, "--admin-port", admin, "--iam-dir", s.iamDir,
		"--region", s.Region, "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+s.AccessKey, "ROOT_SECRET_KEY="+s.SecretKey)
	s.log = &LogBuffer{Max: 64 << 10}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	if err := waitHTTP(ctx, s.URL, exited); err != nil {
		s.kill()
		return fmt.Errorf("%w: %s", err, s.log.String())
	}
	return nil
}

// waitHTTP polls url until anything answers (versitygw answers 403 to anonymous requests).
func waitHTTP(ctx context.Context, url string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return errors.New("versitygw exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("versitygw at %s not answering: %w", url, ctx.Err())
		case <-tick.C:
		}
	}
}

func (s *S3) kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// PID is the server's process id.
func (s *S3) PID() int { return s.cmd.Process.Pid }

// Stop stops the server and removes its directory. Main calls it; calling it again is a no-op.
func (s *S3) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.kill()
		case <-ctx.Done():
			s.kill()
		}
		s.stopErr = errors.Join(os.RemoveAll(s.Dir), os.RemoveAll(s.iamDir), s.guard.Disarm())
	})
	return s.stopErr
}

// Client returns a new minio client for the server (path-style bucket addressing).
func (s *S3) Client() *minio.Client {
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       false,
		Region:       s.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		panic(fmt.Sprintf("testenv: minio client for %s: %v", s.Endpoint, err)) // static options
	}
	return c
}

// ReadOnlyUser makes a user of the gateway that may only read bucket (get and list, through the
// bucket's policy, which it replaces) and returns its keys.
func (s *S3) ReadOnlyUser(t testing.TB, bucket string) (accessKey, secretKey string) {
	t.Helper()
	accessKey, secretKey = "RO"+strings.ToUpper(randomHex(9)), randomHex(20)
	out, err := exec.Command(s.bin, "admin", "--access", s.AccessKey, "--secret", s.SecretKey, "--region", s.Region,
		"--endpoint-url", s.AdminURL, "create-user", "--access", accessKey, "--secret", secretKey, "--role", "user").CombinedOutput()
	if err != nil {
		t.Fatalf("testenv: create a read-only S3 user: %v: %s", err, out)
	}
	policy := fmt.Sprintf(`{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": [%q]},
		"Action": ["s3:GetObject", "s3:ListBucket"], "Resource": ["arn:aws:s3:::%s", "arn:aws:s3:::%s/*"]}]}`, accessKey, bucket, bucket)
	if err := s.Client().SetBucketPolicy(context.Background(), bucket, policy); err != nil {
		t.Fatalf("testenv: bucket policy of %s: %v", bucket, err)
	}
	return accessKey, secretKey
}

// Bucket creates a bucket named after the test (plus a random suffix) and removes it, with
// everything in it, at the test's cleanup.
func (s *S3) Bucket(t testing.TB) string {
	t.Helper()
	name := mangle(t.Name(), '-', 40)
	if len(name) < 3 {
		name = "bucket"
	}
	name += "-" + randomHex(4)
	ctx := context.Background()
	if err := s.Client().MakeBucket(ctx, name, minio.MakeBucketOptions{Region: s.Region}); err != nil {
		t.Fatalf("testenv: create bucket %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.removeBucket(context.Background(), name); err != nil {
			t.Errorf("testenv: remove bucket %s: %v", name, err)
		}
	})
	return name
}

// removeBucket deletes every object of the bucket, then the bucket.
func (s *S3) removeBucket(ctx context.Context, bucket string) error {
	c := s.Client()
	var keys []string
	for obj := range c.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			if minio.ToErrorResponse(obj.Err).Code == "NoSuchBucket" {
				return nil
			}
			return obj.Err
		}
		keys = append(keys, obj.Key)
	}
	for _, key := range keys {
		if err := c.RemoveObject(ctx, bucket, key, minio.RemoveObjectOptions{}); err != nil {
			return fmt.Errorf("remove %s: %w", key, err)
		}
	}
	err := c.RemoveBucket(ctx, bucket)
	if minio.ToErrorResponse(err).Code == "NoSuchBucket" {
		return nil
	}
	return err
}
