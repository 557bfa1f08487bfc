// Command registry is the distribution project's container registry
// (github.com/distribution/distribution/v3, the registry behind Docker Hub
// and GitHub's), built with only what the tests need: the in-memory and
// filesystem storage drivers and htpasswd (basic) authentication. The
// project's own cmd/registry also links the S3, GCS and Azure drivers,
// whose SDKs take the Go module proxy more than 15 minutes to fetch here;
// this file only chooses the drivers, and the registry package serves as
// it does there (`registry serve <config.yml>`).
//
// crates/agent-operator/tests/integration/registry_auth.rs runs it with an
// htpasswd file to test pulls that need credentials. Built from the Go
// module proxy by hack/registry/install.sh (no release binary can be
// downloaded here).
package main

import (
	"os"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
)

func main() {
	if err := registry.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}
