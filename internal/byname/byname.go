// Package byname gives the Kafka API versions cohort's own clients
// negotiate when they name topics: franz-go's stable set, with OffsetCommit
// and OffsetFetch capped at v9.
//
// From v10 those two APIs name topics by ID, and a topic outside cohort's
// catalog has none (its records live in a cluster cohort does not see), so
// a v10 fetch of all of a group's offsets leaves it out and a v10 commit
// cannot name it. The operator's tools (the CLI, the console) and the
// benchmark's load generator must see and write every topic a group has
// committed, whatever the catalog holds, so they stay at v9, which cohort and
// Kafka 4 serve alike.
package byname

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// LastVersion is the last version of OffsetCommit and OffsetFetch that
// names topics.
const LastVersion = 9

// Versions returns franz-go's stable versions with OffsetCommit and
// OffsetFetch capped at LastVersion.
func Versions() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), LastVersion)
	v.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), LastVersion)
	return v
}

// Opt is the client option that applies Versions.
func Opt() kgo.Opt { return kgo.MaxVersions(Versions()) }
