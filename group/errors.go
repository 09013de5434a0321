package group

// Kafka error codes used by the group coordinator.
const (
	ErrNone                    int16 = 0
	ErrUnknownServer           int16 = -1
	ErrOffsetMetadataTooLarge  int16 = 12
	ErrCoordinatorLoading      int16 = 14 // COORDINATOR_LOAD_IN_PROGRESS
	ErrCoordinatorNotAvailable int16 = 15
	ErrNotCoordinator          int16 = 16
	ErrIllegalGeneration       int16 = 22
	ErrInconsistentProtocol    int16 = 23
	ErrInvalidGroupID          int16 = 24
	ErrUnknownMemberID         int16 = 25
	ErrInvalidSessionTimeout   int16 = 26
	ErrRebalanceInProgress     int16 = 27
	ErrInvalidRequest          int16 = 42
	ErrNonEmptyGroup           int16 = 68
	ErrGroupIDNotFound         int16 = 69
	ErrMemberIDRequired        int16 = 79
	ErrGroupMaxSizeReached     int16 = 81
	ErrFencedInstanceID        int16 = 82
	ErrGroupSubscribedToTopic  int16 = 86
	ErrUnstableOffsetCommit    int16 = 88
)
