package testenv

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// DockerImage is the image StartPostgres runs under Docker when no version is chosen.
const DockerImage = "postgres:17"

// dockerAnswers reports whether a Docker engine responds within a few seconds.
func dockerAnswers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return false
	}
	return provider.Health(ctx) == nil // Health closes the provider
}

// startDockerPostgres runs DockerImage with the same settings a local cluster gets.
func startDockerPostgres(ctx context.Context, opts PGOptions) (*Postgres, error) {
	password := randomHex(16)
	cmd := []string{"postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "wal_level=logical",
		"-c", "max_replication_slots=40", "-c", "max_wal_senders=40",
		"-c", "max_connections=200", "-c", "max_locks_per_transaction=128"}
	keys := make([]string, 0, len(opts.Settings))
	for k := range opts.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd = append(cmd, "-c", k+"="+opts.Settings[k])
	}
	image := DockerImage
	if v, err := opts.version(); err != nil {
		return nil, err
	} else if v != 0 {
		image = fmt.Sprintf("postgres:%d", v)
	}
	ctr, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithUsername("postgres"), tcpostgres.WithPassword(password),
		tcpostgres.WithDatabase("postgres"), testcontainers.WithCmd(cmd...),
		tcpostgres.BasicWaitStrategies())
	if err != nil {
		if ctr != nil {
			_ = testcontainers.TerminateContainer(ctr)
		}
		return nil, err
	}
	host, err := ctr.Host(ctx)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	port, err := ctr.MappedPort(ctx, "5432/tcp")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	opts.Logger.Info("postgres container started", "cluster", opts.Name, "host", host, "port", port.Num())
	p := &Postgres{
		Name: opts.Name, SuperUser: "postgres", SuperPassword: password, Docker: true,
		host: host, port: int(port.Num()),
		stop: func(ctx context.Context) error {
			if err := testcontainers.TerminateContainer(ctr); err != nil {
				return fmt.Errorf("terminate container: %w", err)
			}
			return nil
		},
	}
	if p.Major, err = p.serverMajor(ctx); err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	return p, nil
}
