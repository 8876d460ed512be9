"""The engine: worker coroutines, scopes, channels, progress broadcast. Built in a later issue."""
