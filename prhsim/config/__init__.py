"""Settings of every command (pydantic, strict, unknown keys rejected), merged in one place."""

from prhsim.config._files import (
    ConfigError as ConfigError,
    is_run_folder_config as is_run_folder_config,
    read_config_file as read_config_file,
)
from prhsim.config._merge import (
    format_validation_error as format_validation_error,
    parse_assignment as parse_assignment,
    resolve_run_config as resolve_run_config,
    resolve_settings as resolve_settings,
)
from prhsim.config._training import (
    LEARNER_CHOICES as LEARNER_CHOICES,
    TrainingSettings as TrainingSettings,
)
from prhsim.config._run import RUN_DEFAULT_EPS as RUN_DEFAULT_EPS, RunConfig as RunConfig
from prhsim.config._worlds import (
    GRIDSCENE_MODALITIES as GRIDSCENE_MODALITIES,
    CaptionConfig as CaptionConfig,
    MAX_STATES as MAX_STATES,
    WORLD_KINDS as WORLD_KINDS,
    WORLD_MODELS as WORLD_MODELS,
    GridSceneWorld as GridSceneWorld,
    GridWorld as GridWorld,
    Settings as Settings,
    RandomWorld as RandomWorld,
    RingWorld as RingWorld,
    TorusWorld as TorusWorld,
    WorldConfig as WorldConfig,
)

__all__ = [
    "CaptionConfig",
    "ConfigError",
    "RUN_DEFAULT_EPS",
    "format_validation_error",
    "GRIDSCENE_MODALITIES",
    "GridSceneWorld",
    "GridWorld",
    "is_run_folder_config",
    "LEARNER_CHOICES",
    "MAX_STATES",
    "parse_assignment",
    "RandomWorld",
    "read_config_file",
    "resolve_run_config",
    "resolve_settings",
    "RingWorld",
    "RunConfig",
    "Settings",
    "TorusWorld",
    "TrainingSettings",
    "WORLD_KINDS",
    "WORLD_MODELS",
    "WorldConfig",
]
