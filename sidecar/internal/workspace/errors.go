package workspace

import (
	"github.com/dataenv/dataenv/sidecar/internal/request"
)

func retryable(err error) error { return request.Retryable(err) }
