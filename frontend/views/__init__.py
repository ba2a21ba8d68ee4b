"""The console's pages: sign-in, the workflows list, a run's summary and history."""
